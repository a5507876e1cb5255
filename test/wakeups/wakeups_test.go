// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/plugin/commands"
	"github.com/vidra-operator/vidra/internal/testenv"
	"github.com/vidra-operator/vidra/internal/wakeups"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// The users the clients of the test run as; each is its own client.
const (
	vidraUser = "vidra"
	poller    = "poller"
	beater    = "heartbeat"
	looper    = "hotloop"
	fighterA  = "fighter-a"
	fighterB  = "fighter-b"
)

// The rhythms of the test's clients: short, so that the test is lean, and
// not the 10 s and 15 s of real controllers, so that a detector assuming
// them fails.
const (
	pollPeriod = 1500 * time.Millisecond
	polls      = 10
	beatPeriod = 2 * time.Second
	beats      = 8
	loops      = 30
	fightTurn  = 400 * time.Millisecond
	fights     = 20
)

// userClient is a clientset that authenticates as user (in system:masters)
// and sends userAgent.
func userClient(t *testing.T, user, userAgent string) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, err := env.UserConfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = userAgent
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, kubernetes.NewForConfigOrDie(cfg)
}

// every calls fn n times, period apart, starting now: a controller that
// requeues itself after period. It stops early when ctx ends.
func every(ctx context.Context, n int, period time.Duration, fn func(i int) error) error {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := range n {
		if err := fn(i); err != nil {
			return err
		}
		if i == n-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// startVidra runs the operator in-process as user vidra, with leader
// election at its defaults, until the test ends.
func startVidra(t *testing.T) versioned.Interface {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(t.Context(), env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml")); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vidra-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := userClient(t, vidraUser, "vidra-operator")
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, operator.Options{
		Config:            cfg,
		Namespace:         "vidra-system",
		TrustedNamespaces: []string{destination.AllNamespaces},
		Workers:           2,
		LeaderElection:    operator.LeaderElection{Enabled: true},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	return versioned.NewForConfigOrDie(env.Config)
}

// report runs kubectl vidra wakeups on the audit log with args and
// returns what -o json printed and the exit code.
func report(t *testing.T, args ...string) (result, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	code := commands.Execute(t.Context(), streams, append([]string{"wakeups", "--audit-log", auditLog, "-o", "json"}, args...))
	var res result
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("wakeups -o json: %v\n%s%s", err, out, errOut)
		}
	}
	return res, code
}

type result struct {
	wakeups.Report
	Budgets []wakeups.BudgetResult `json:"budgets"`
}

// table is what a person reads, for the test's log.
func table(t *testing.T, args ...string) string {
	t.Helper()
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	commands.Execute(t.Context(), streams, append([]string{"wakeups", "--audit-log", auditLog, "--top", "8"}, args...))
	return out.String()
}

// stream returns the busiest stream of user's clients with verb on resource.
func stream(t *testing.T, rep wakeups.Report, user, verb, resource string) (wakeups.Client, wakeups.Stream) {
	t.Helper()
	for _, c := range rep.Clients {
		if c.User != user {
			continue
		}
		for _, s := range c.Streams {
			if s.Verb == verb && s.Resource == resource {
				return c, s
			}
		}
	}
	t.Fatalf("no %s %s of user %s in the report", verb, resource, user)
	return wakeups.Client{}, wakeups.Stream{}
}

// checkPeriod fails unless s's period is within a quarter of want: the
// clients run under -race on a shared machine.
func checkPeriod(t *testing.T, s wakeups.Stream, want time.Duration) {
	t.Helper()
	got := time.Duration(s.PeriodSeconds * float64(time.Second))
	if d := got - want; d > want/4 || -d > want/4 {
		t.Errorf("%s %s %s: period %s, want %s ± 25%%", s.Verb, s.Resource, s.Object(), got, want)
	}
}

// waitLogged waits until the audit log holds a request naming marker: the
// API server has then written every request answered before it.
func waitLogged(t *testing.T, kube kubernetes.Interface, marker string) {
	t.Helper()
	_, _ = kube.CoreV1().ConfigMaps("default").Get(t.Context(), marker, metav1.GetOptions{})
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(auditLog)
		return err == nil && bytes.Contains(b, []byte(marker)), nil
	})
	if err != nil {
		t.Fatalf("the audit log never showed %s: %v", marker, err)
	}
}

func TestWakeupsNamesEachClientsCauseOnRealTraffic(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(env.Config)
	vidra := startVidra(t)

	// Vidra with a few resources, until they are Ready: then it is idle.
	ns := testenv.Namespace(t, kube, "apps")
	for i := range 5 {
		name := fmt.Sprintf("app-%d", i)
		testenv.CreateVR(t, vidra, ns, name, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+name+"\ndata:\n  k: v\n")
	}
	for i := range 5 {
		testenv.WaitVR(t, vidra, ns, fmt.Sprintf("app-%d", i), "Ready", func(vr *v1alpha1.VidraResource) bool {
			c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
		})
	}
	for _, name := range []string{"settings", "beat", "busy", "contested"} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitLogged(t, kube, "marker-idle-start")
	idleStart := time.Now()

	// The clients, each for a bounded count of requests, at once.
	_, poll := userClient(t, poller, "poller/v0.1.0 (linux/amd64) kubernetes/abc123")
	_, beat := userClient(t, beater, "heartbeat/v2.3.4")
	_, loop := userClient(t, looper, "hotloop/v1.0.0")
	_, fa := userClient(t, fighterA, "fighter-a/v1")
	_, fb := userClient(t, fighterB, "fighter-b/v1")
	cms := func(c kubernetes.Interface) func(name string, patch string) error {
		return func(name, patch string) error {
			_, err := c.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	clients := map[string]func() error{
		poller: func() error {
			return every(t.Context(), polls, pollPeriod, func(int) error {
				_, err := poll.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
				return err
			})
		},
		beater: func() error {
			return every(t.Context(), beats, beatPeriod, func(i int) error {
				return cms(beat)("beat", fmt.Sprintf(`{"metadata":{"annotations":{"heartbeat":"%d"}}}`, i))
			})
		},
		looper: func() error {
			for i := range loops {
				if err := cms(loop)("busy", fmt.Sprintf(`{"data":{"n":"%d"}}`, i)); err != nil {
					return err
				}
			}
			return nil
		},
		"fight": func() error {
			return every(t.Context(), fights, fightTurn, func(i int) error {
				if i%2 == 0 {
					return cms(fa)("contested", `{"data":{"owner":"a"}}`)
				}
				return cms(fb)("contested", `{"data":{"owner":"b"}}`)
			})
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for name, run := range clients {
		wg.Go(func() {
			if err := run(); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	idleEnd := time.Now()
	waitLogged(t, kube, "marker-idle-end")

	window := []string{"--since", idleStart.UTC().Format(time.RFC3339Nano), "--until", idleEnd.UTC().Format(time.RFC3339Nano)}
	t.Logf("kubectl vidra wakeups %s:\n%s", strings.Join(window, " "), table(t, window...))
	rep, code := report(t, window...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}

	_, s := stream(t, rep.Report, poller, "get", "configmaps")
	if s.Cause != wakeups.RequeuePoll || s.Requests != polls {
		t.Errorf("poller: %s (%s), %d requests, want %s, %d", s.Cause, s.Reason, s.Requests, wakeups.RequeuePoll, polls)
	}
	checkPeriod(t, s, pollPeriod)

	_, s = stream(t, rep.Report, beater, "patch", "configmaps")
	if s.Cause != wakeups.Heartbeat || s.Requests != beats {
		t.Errorf("heartbeat: %s (%s), %d requests, want %s, %d", s.Cause, s.Reason, s.Requests, wakeups.Heartbeat, beats)
	}
	checkPeriod(t, s, beatPeriod)

	_, s = stream(t, rep.Report, looper, "patch", "configmaps")
	if s.Cause != wakeups.HotLoop || s.Requests != loops {
		t.Errorf("hot loop: %s (%s), %d requests, want %s, %d", s.Cause, s.Reason, s.Requests, wakeups.HotLoop, loops)
	}

	for user, rival := range map[string]string{fighterA: "fighter-b", fighterB: "fighter-a"} {
		_, s = stream(t, rep.Report, user, "patch", "configmaps")
		if s.Cause != wakeups.Fight || !strings.Contains(s.Reason, rival) {
			t.Errorf("%s: %s (%s), want %s with %s", user, s.Cause, s.Reason, wakeups.Fight, rival)
		}
		checkPeriod(t, s, 2*fightTurn)
	}

	// Idle, Vidra renews its Lease (get and update every RetryPeriod, 2 s)
	// and keeps its watches open: nothing else.
	_, s = stream(t, rep.Report, vidraUser, "update", "coordination.k8s.io/leases")
	if s.Cause != wakeups.LeaseRenewal {
		t.Errorf("vidra's Lease: %s (%s)", s.Cause, s.Reason)
	}
	checkPeriod(t, s, 2*time.Second)
	for _, c := range rep.Clients {
		if c.User != vidraUser {
			continue
		}
		for _, s := range c.Streams {
			if s.Cause != wakeups.LeaseRenewal && s.Cause != wakeups.WatchRestart {
				t.Errorf("idle vidra (%s): %d %s %s %s: %s (%s)", c.Name, s.Requests, s.Verb, s.Resource, s.Object(), s.Cause, s.Reason)
			}
		}
	}
	// The budget: the Lease's get and update every 2 s, 3,600 an hour, and
	// a few watch restarts. It holds; a budget below the Lease's cost
	// does not, so the check is not blind.
	if res, code := report(t, append(window, "--budget", vidraUser+"=4000/h")...); code != 0 {
		t.Errorf("vidra's idle budget of 4000/h: exit %d, %+v", code, res.Budgets)
	}
	if res, code := report(t, append(window, "--budget", vidraUser+"=1000/h")...); code != 1 {
		t.Errorf("a budget of 1000/h under the Lease's cost: exit %d, want 1, %+v", code, res.Budgets)
	}

	// kube-controller-manager's controllers, over the whole log: named, and
	// none of them loops or fights.
	whole, _ := report(t)
	t.Logf("kubectl vidra wakeups --client kube-controller-manager (whole log):\n%s", table(t, "--client", "kube-controller-manager"))
	kcm, starts := 0, 0
	for _, c := range whole.Clients {
		if !strings.HasPrefix(c.Name, "kube-controller-manager") {
			continue
		}
		kcm++
		for _, s := range c.Streams {
			// Its shared informers start in the log: one streaming list
			// each.
			if c.Name == "kube-controller-manager/shared-informers" && s.Verb == "watch" && s.Cause == wakeups.InitialList {
				starts++
			}
			if s.Cause == wakeups.HotLoop || s.Cause == wakeups.Fight {
				t.Errorf("%s: %s %s %s: %s (%s)", c.Name, s.Verb, s.Resource, s.Object(), s.Cause, s.Reason)
			}
		}
	}
	if kcm == 0 || starts < 10 {
		t.Errorf("%d kube-controller-manager clients, %d informer starts of its shared informers, want some and at least 10", kcm, starts)
	}
}
