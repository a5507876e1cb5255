// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package infrahub_test runs InfrahubSyncs end to end: one operator,
// in-process, against a real API server (with the garbage collector) and a
// stand-in Infrahub per test (internal/infrahub/standin), whose request
// counters tell what each poll cost. The operator trusts its own namespace
// and the namespaces named in trusted; every other namespace is a tenant's.
package infrahub_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller/infrahubsync"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

const operatorNamespace = "vidra-system"

// trusted are the namespaces whose syncs act as the operator; tests that
// need one take one of their own.
var trusted = []string{operatorNamespace, "ihs-apply", "ihs-owners", "ihs-tokens", "ihs-faults", "ihs-bounds", "ihs-tls", "ihs-refresh", "ihs-webhooks", "ihs-webhook-poll"}

// callTimeout is the Infrahub client's per-call timeout here: short, so
// that a slow answer is a timeout within the test.
const callTimeout = 2 * time.Second

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
	// op is the operator, for its webhook receiver's address and counts.
	op     *operator.Operator
	passes = &passCounter{counts: map[cache.ObjectName]*passCount{}}
)

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}, startOperator) }

func startOperator(ctx context.Context, e *testenv.Env) (func(), error) {
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	guard := destination.Guard{AllowHTTP: true}
	var stop func()
	var err error
	op, stop, err = testenv.RunOperator(ctx, e, operator.Options{
		Namespace:         operatorNamespace,
		WebhookAddr:       "127.0.0.1:0",
		TrustedNamespaces: trusted,
		RemoteGuard:       guard,
		Workers:           4,
		Linger:            2 * time.Second,
		OnSyncPass:        passes.record,
		InfrahubSources: func(req infrahubsync.SourceRequest) (infrahubsync.ArtifactSource, error) {
			hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: guard, CAPEM: req.CAPEM})
			if err != nil {
				return nil, err
			}
			return infrahub.New(req.URL, infrahub.Options{HTTPClient: hc, AllowHTTP: true, Credentials: req.Credentials, Timeout: callTimeout})
		},
	})
	return stop, err
}

type passCount struct{ passes, failed, webhook int }

// passCounter counts the passes of each sync, and the failed ones.
type passCounter struct {
	mu     sync.Mutex
	counts map[cache.ObjectName]*passCount
}

func (p *passCounter) record(key cache.ObjectName, trigger infrahubsync.Trigger, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts[key]
	if c == nil {
		c = &passCount{}
		p.counts[key] = c
	}
	c.passes++
	if trigger == infrahubsync.TriggerWebhook {
		c.webhook++
	}
	if err != nil {
		c.failed++
	}
}

func (p *passCounter) of(ns, name string) passCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.counts[cache.ObjectName{Namespace: ns, Name: name}]; c != nil {
		return *c
	}
	return passCount{}
}

// waitPasses waits until the sync has finished n more passes than before:
// the barrier of checks that a pass did nothing.
func waitPasses(t *testing.T, ns, name string, before, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return passes.of(ns, name).passes >= before+n, nil
	})
	if err != nil {
		t.Fatalf("sync %s/%s did not finish %d more passes: %v", ns, name, n, err)
	}
}

// namespace creates the namespace name for one test and deletes it after.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vidra.InfrahubV1alpha1().InfrahubSyncs(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = vidra.InfrahubV1alpha1().VidraResources(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// infrahubServer starts a stand-in Infrahub with a user and the earlier
// operator's stored query, closed after the test.
func infrahubServer(t *testing.T, opts standin.Options) *standin.Server {
	t.Helper()
	s := standin.New(opts)
	s.Start()
	t.Cleanup(s.Close)
	s.AddUser("vidra", "s3cret")
	s.AddStoredQuery("ArtifactIDs", standin.ArtifactIDsQuery)
	return s
}

// credentials creates the Secret of the stand-in's user in ns.
func credentials(t *testing.T, ns string) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "infrahub"},
		StringData: map[string]string{"username": "vidra", "password": "s3cret"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// configMapArtifact is an artifact whose content is one ConfigMap.
func configMapArtifact(id, name, value string) standin.Artifact {
	return standin.Artifact{
		ID: id, Name: "device-config", Definition: "device-configs", Target: "target-" + id, ContentType: "application/yaml",
		Content: fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value),
	}
}

// createSync creates an InfrahubSync of the artifacts named device-config
// at s, polled every second.
func createSync(t *testing.T, ns, name string, s *standin.Server, mutate ...func(*v1alpha1.InfrahubSync)) *v1alpha1.InfrahubSync {
	t.Helper()
	sync := &v1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.InfrahubSyncSpec{
			Source: v1alpha1.InfrahubSource{
				InfrahubAPIURL: s.URL(), ArtefactName: "device-config",
				CredentialsSecretRef: &v1alpha1.LocalSecretReference{Name: "infrahub"},
			},
			Interval: &metav1.Duration{Duration: time.Second},
		},
	}
	for _, m := range mutate {
		m(sync)
	}
	created, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Create(context.Background(), sync, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitSync polls the sync until cond holds.
func waitSync(t *testing.T, ns, name, what string, cond func(*v1alpha1.InfrahubSync) bool) *v1alpha1.InfrahubSync {
	t.Helper()
	var last *v1alpha1.InfrahubSync
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		t.Fatalf("InfrahubSync %s/%s never %s; last status: %+v", ns, name, what, last.Status)
	}
	return last
}

func syncCondition(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.InfrahubSync) bool {
	return func(s *v1alpha1.InfrahubSync) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && s.Status.ObservedGeneration == s.Generation
	}
}

func syncReady(s *v1alpha1.InfrahubSync) bool {
	return syncCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)(s)
}

func readyCondition(s *v1alpha1.InfrahubSync) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
}

// configMapValue returns the value key of ConfigMap ns/name, "" if absent.
func configMapValue(ctx context.Context, ns, name string) (string, bool) {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	return cm.Data["value"], true
}

func waitConfigMap(t *testing.T, ns, name, value string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		v, ok := configMapValue(ctx, ns, name)
		return ok && v == value, nil
	})
	if err != nil {
		v, ok := configMapValue(context.Background(), ns, name)
		t.Fatalf("ConfigMap %s/%s never held %q (exists %v, holds %q)", ns, name, value, ok, v)
	}
}

func waitConfigMapGone(t *testing.T, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("ConfigMap %s/%s was never deleted", ns, name)
	}
}

func waitVRGone(t *testing.T, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("VidraResource %s/%s was never deleted", ns, name)
	}
}

// resourceVersions returns the resourceVersion of the sync and of every
// VidraResource of ns, by name.
func resourceVersions(t *testing.T, ns, sync string) map[string]string {
	t.Helper()
	out := map[string]string{}
	s, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Get(context.Background(), sync, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["sync/"+sync] = s.ResourceVersion
	vrs, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, vr := range vrs.Items {
		out[vr.Name] = vr.ResourceVersion
	}
	return out
}

func names(vrs []v1alpha1.VidraResource) []string {
	var out []string
	for _, vr := range vrs {
		out = append(out, vr.Name)
	}
	slices.Sort(out)
	return out
}
