// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// Labels (benchLabel) and namespace prefixes of the health section's
// resources.
const (
	healthPrefix = "health"
	chainPrefix  = "chain"
)

// healthPlan says what the health section measures.
type healthPlan struct {
	// n resources, each with one Deployment of one replica.
	n int
	// churn status updates that leave every Deployment's health as it is.
	churn int
	// samples health transitions timed, alternately out of and back to
	// Current.
	samples int
	// chains of depth resources, each depending on the one before.
	chains, depth int
	timeout       time.Duration
	pause         time.Duration
}

// healthResult is what the health section measured.
type healthResult struct {
	Resources int `json:"resources"`
	// SetupSeconds runs from the first create to every resource Healthy,
	// the benchmark writing each Deployment's status as soon as it exists.
	SetupSeconds float64            `json:"setupSeconds"`
	Churn        *healthChurnResult `json:"statusChurnKeepingHealth"`
	Transition   *transitionResult  `json:"transitionLatency"`
	Chains       *chainResult       `json:"dependsOnChains"`
}

// healthChurnResult is the cost of status updates of healthy Deployments
// that kstatus ignores (conditions' lastUpdateTime).
type healthChurnResult struct {
	Updates int `json:"statusUpdates"`
	// Reconciles and Requests are those of the churn: the raw counts of the
	// window less what the barrier costs by design (one reconcile, one
	// status write).
	Reconciles float64 `json:"reconciles"`
	Requests   int     `json:"operatorRequests"`
	// Woken counts the owners the watch registry woke for the churn, the
	// barrier's wake-up excluded.
	Woken              float64 `json:"ownersWoken"`
	EventsReceived     float64 `json:"watchEventsReceived"`
	FilteredStatusOnly float64 `json:"watchEventsFilteredStatusOnly"`
	// BarrierSeen says the barrier's status write arrived: the window ends
	// only after every churn event has passed the operator's filter.
	BarrierSeen bool    `json:"barrierSeen"`
	BarrierMs   float64 `json:"barrierLatencyMs"`
	// Raw are the window's figures, the barrier included.
	RawReconciles map[string]float64 `json:"rawReconcilesByTrigger"`
	RawRequests   requestCount       `json:"rawOperatorRequests"`
}

// transitionResult is the time from a Deployment's health-changing status
// write to the parent's status write showing it.
type transitionResult struct {
	Samples  int `json:"samples"`
	Observed int `json:"observed"`
	Missed   int `json:"missed"`
	// Stats runs from the answer to the Deployment's status write to the
	// arrival of the parent's update on the benchmark's watch; FromRequest
	// from just before that write was sent.
	Stats       latencyStat `json:"latencyMs"`
	FromRequest latencyStat `json:"fromRequestMs"`
	// ToInProgress and ToCurrent split Stats by direction.
	ToInProgress        latencyStat `json:"toInProgressMs"`
	ToInProgressSamples int         `json:"toInProgressSamples"`
	ToCurrent           latencyStat `json:"toCurrentMs"`
	ToCurrentSamples    int         `json:"toCurrentSamples"`
	// Reconciles and Requests are the operator's over all samples.
	ReconcilesPerTransition float64      `json:"reconcilesPerTransition"`
	Requests                requestCount `json:"operatorRequests"`
	RequestsPerTransition   float64      `json:"operatorRequestsPerTransition"`
	LatenciesMs             []float64    `json:"latenciesMs"`
}

// chainResult is how fast readiness travels down chains of spec.dependsOn.
type chainResult struct {
	Chains    int `json:"chains"`
	Depth     int `json:"depth"`
	Resources int `json:"resources"`
	NotReady  int `json:"notReady"`
	// WallClockMs runs from the first resource Ready to the last;
	// FromCreateMs from the first create of a chain's head to the last
	// Ready.
	WallClockMs  float64 `json:"wallClockFirstToLastReadyMs"`
	FromCreateMs float64 `json:"fromFirstCreateToLastReadyMs"`
	// SumOfLinksMs adds up every link: the time from a resource's dependency
	// becoming Ready to itself becoming Ready, both as the benchmark's watch
	// saw them. It is what the chains would take one resource at a time.
	SumOfLinksMs float64     `json:"sumOfLinksMs"`
	Link         latencyStat `json:"linkMs"`
	// Head is a chain head's time from its create request to Ready: one
	// resource applied with nothing to wait for.
	Head  latencyStat `json:"headCreateToReadyMs"`
	Chain latencyStat `json:"chainFirstToLastReadyMs"`
	// Reconciles and Requests are the operator's from the first create of a
	// head until reconciles stopped.
	ReconcilesByTrigger map[string]float64 `json:"reconcilesByTrigger"`
	Requests            requestCount       `json:"operatorRequests"`
	LinkLatenciesMs     []float64          `json:"linkLatenciesMs"`
}

// measureHealth creates the health section's resources and measures, in
// order, status churn that keeps health, health transitions, and chains of
// dependencies.
func measureHealth(ctx context.Context, c *cluster, plan healthPlan) (*healthResult, error) {
	if err := createNamespaces(ctx, c.kube, healthPrefix, plan.n, 16); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, c.kube, chainPrefix, plan.chains, 4); err != nil {
		return nil, err
	}
	h, err := startResourceHub(ctx, c.vidra)
	if err != nil {
		return nil, err
	}
	w := &deploymentWriter{kube: c.kube, base: time.Now().UTC().Truncate(time.Second),
		gens: make([]int64, plan.n), since: make([]time.Time, plan.n), available: make([]bool, plan.n)}
	res := &healthResult{Resources: plan.n}

	logf("health: %d resources with a Deployment of one replica, spec.wait", plan.n)
	start := time.Now()
	if err := parallelDo(ctx, plan.n, 16, func(ctx context.Context, i int) error {
		vr := healthResource(i)
		if _, err := c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
		}
		return w.rollOut(ctx, i, plan.timeout)
	}); err != nil {
		return nil, err
	}
	if err := waitResources(ctx, c.vidra, healthPrefix, plan.n, objName, plan.timeout, func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionHealthy)
	}); err != nil {
		return nil, fmt.Errorf("health resources not Ready and Healthy within %s: %w", plan.timeout, err)
	}
	res.SetupSeconds = round(time.Since(start).Seconds(), 2)
	logf("health: %d resources Ready and Healthy in %.1f s", plan.n, res.SetupSeconds)

	logf("health: %d status updates that keep health", plan.churn)
	if res.Churn, err = measureHealthChurn(ctx, c, h, w, plan); err != nil {
		return nil, err
	}
	logf("health churn: %.0f reconciles, %d requests (%.0f events received, %.0f filtered as status-only; barrier seen: %t)",
		res.Churn.Reconciles, res.Churn.Requests, res.Churn.EventsReceived, res.Churn.FilteredStatusOnly, res.Churn.BarrierSeen)

	logf("health: %d transitions", plan.samples)
	if res.Transition, err = measureTransitions(ctx, c, h, w, plan); err != nil {
		return nil, err
	}
	t := res.Transition
	logf("health transitions: n=%d p50=%.1fms p99=%.1fms max=%.1fms missed=%d (%.2f reconciles, %.2f requests each)",
		t.Observed, t.Stats.P50, t.Stats.P99, t.Stats.Max, t.Missed, t.ReconcilesPerTransition, t.RequestsPerTransition)

	logf("dependsOn: %d chains of %d", plan.chains, plan.depth)
	if res.Chains, err = measureChains(ctx, c, h, plan); err != nil {
		return nil, err
	}
	ch := res.Chains
	logf("dependsOn: first to last Ready %.0f ms, sum of links %.0f ms; link p50=%.1fms p99=%.1fms; not Ready: %d",
		ch.WallClockMs, ch.SumOfLinksMs, ch.Link.P50, ch.Link.P99, ch.NotReady)
	return res, nil
}

// measureHealthChurn sends plan.churn status updates to the Deployments that
// change only their conditions' lastUpdateTime, which kstatus ignores, and
// then one that makes a Deployment unavailable: the barrier. The watch
// registry handles one informer's events in order, so once the barrier's
// parent has written its status every churn event has been filtered or
// delivered, and the window can be counted. What the barrier itself costs
// (a reconcile and a status write) is subtracted.
func measureHealthChurn(ctx context.Context, c *cluster, h *hub, w *deploymentWriter, plan healthPlan) (*healthChurnResult, error) {
	if err := settle(ctx, c, 2*time.Second, time.Minute); err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	mark := audit.mark()
	start := time.Now()
	for j := range plan.churn {
		i := j % plan.n
		if err := w.keep(ctx, i); err != nil {
			return nil, err
		}
	}
	barrier := 0
	flip, err := transition(ctx, h, w, barrier, false, plan.timeout)
	if err != nil {
		return nil, err
	}
	// The reconcile is counted after its status write returns: wait for it
	// so that the barrier's reconcile is inside the window.
	m1 := metricsDelta{before: m0}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		m, err := c.op.Metrics(ctx)
		if err != nil {
			return false, err
		}
		m1.after = m
		return !flip.seen || m1.delta("vidra_reconciles_total", nil) >= 1, nil
	})
	if err != nil && (m1.after == nil || !wait.Interrupted(err)) {
		return nil, fmt.Errorf("operator metrics after the barrier: %w", err)
	}
	end := time.Now()
	time.Sleep(time.Second) // the audit log trails the responses a little
	reqs, err := audit.requests(operatorUser, mark, start, end)
	if err != nil {
		return nil, err
	}
	byTrigger := m1.byLabel("vidra_reconciles_total", "trigger")
	res := &healthChurnResult{
		Updates:            plan.churn,
		EventsReceived:     m1.delta("vidra_watchregistry_events_received_total", nil),
		FilteredStatusOnly: m1.delta("vidra_watchregistry_events_filtered_total", map[string]string{"reason": "status-only"}),
		BarrierSeen:        flip.seen,
		BarrierMs:          flip.latencyMs,
		RawReconciles:      byTrigger,
		RawRequests:        reqs,
	}
	barrierCost := 0
	if flip.seen {
		barrierCost = 1
	}
	res.Reconciles = max(0, m1.delta("vidra_reconciles_total", nil)-float64(barrierCost))
	res.Woken = max(0, m1.delta("vidra_watchregistry_events_delivered_total", nil)-float64(barrierCost))
	statusWrites := reqs.ByResource["update vidraresources/status"] + reqs.ByResource["patch vidraresources/status"]
	res.Requests = reqs.Total - min(barrierCost, statusWrites)
	// Back to Current, so that every transition sample starts healthy.
	if err := w.write(ctx, barrier, true); err != nil {
		return nil, err
	}
	ns := nsName(healthPrefix, barrier)
	if err := waitResource(ctx, c.vidra, ns, objName, plan.timeout, func(vr *v1alpha1.VidraResource) bool { return reportsHealth(vr, true) }); err != nil {
		return nil, fmt.Errorf("VidraResource %s/%s: not Healthy again within %s: %w", ns, objName, plan.timeout, err)
	}
	return res, nil
}

// measureTransitions makes Deployments unavailable and available again, one
// status write at a time, and times each until the parent's status shows it.
func measureTransitions(ctx context.Context, c *cluster, h *hub, w *deploymentWriter, plan healthPlan) (*transitionResult, error) {
	if err := settle(ctx, c, 2*time.Second, time.Minute); err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	mark, from := audit.mark(), time.Now()
	res := &transitionResult{}
	var fromRequest, out, back []float64
	skip := false
	for j := range plan.samples {
		if skip {
			skip = false
			continue
		}
		// Each resource goes out of Current and back in two consecutive
		// samples, so that every sample starts from a settled state.
		i, available := (j/2)%plan.n, j%2 == 1
		f, err := transition(ctx, h, w, i, available, plan.timeout)
		if err != nil {
			return nil, err
		}
		res.Samples++
		if !f.seen {
			res.Missed++
			ns := nsName(healthPrefix, i)
			logf("  health of %s: parent not updated within %s", ns, plan.timeout)
			// Where the parent stands is unknown: make the Deployment
			// available, wait until the parent says so, and skip the
			// other half of the pair, which would start from there.
			if err := w.write(ctx, i, true); err != nil {
				return nil, err
			}
			if err := waitResource(ctx, c.vidra, ns, objName, plan.timeout, func(vr *v1alpha1.VidraResource) bool { return reportsHealth(vr, true) }); err != nil {
				return nil, fmt.Errorf("VidraResource %s/%s: not Healthy again within %s: %w", ns, objName, plan.timeout, err)
			}
			skip = !available
			continue
		}
		res.Observed++
		res.LatenciesMs = append(res.LatenciesMs, f.latencyMs)
		fromRequest = append(fromRequest, f.fromRequestMs)
		if available {
			back = append(back, f.latencyMs)
		} else {
			out = append(out, f.latencyMs)
		}
		select {
		case <-time.After(plan.pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := settle(ctx, c, time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	m1, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	to := time.Now()
	time.Sleep(time.Second) // the audit log trails the responses a little
	reqs, err := audit.requests(operatorUser, mark, from, to)
	if err != nil {
		return nil, err
	}
	res.Requests = reqs
	if res.Samples > 0 {
		d := metricsDelta{before: m0, after: m1}
		res.ReconcilesPerTransition = round(d.delta("vidra_reconciles_total", nil)/float64(res.Samples), 2)
		res.RequestsPerTransition = round(float64(reqs.Total)/float64(res.Samples), 2)
	}
	res.Stats, res.FromRequest = stats(res.LatenciesMs), stats(fromRequest)
	res.ToInProgress, res.ToCurrent = stats(out), stats(back)
	res.ToInProgressSamples, res.ToCurrentSamples = len(out), len(back)
	return res, nil
}

// flipTiming is one health transition as the benchmark saw it.
type flipTiming struct {
	seen          bool
	latencyMs     float64
	fromRequestMs float64
}

// transition writes the status of resource i's Deployment so that it is
// available or not, and waits for the parent's update that shows the new
// health: the Healthy condition and the Deployment's entry of
// status.managedResources. The subscription starts before the write, so a
// parent update that arrives before the write's answer is not lost.
func transition(ctx context.Context, h *hub, w *deploymentWriter, i int, available bool, timeout time.Duration) (flipTiming, error) {
	ns := nsName(healthPrefix, i)
	sub := h.subscribe("vidraresources", ns, objName)
	defer h.unsubscribe("vidraresources", ns, objName)
	sent := time.Now()
	if err := w.write(ctx, i, available); err != nil {
		return flipTiming{}, err
	}
	answered := time.Now()
	at, ok := sub.await(ctx, timeout, func(ev watch.Event) bool { return showsHealth(ev, available) })
	if ctx.Err() != nil {
		return flipTiming{}, ctx.Err()
	}
	if !ok {
		return flipTiming{}, nil
	}
	return flipTiming{seen: true, latencyMs: ms(at.Sub(answered)), fromRequestMs: ms(at.Sub(sent))}, nil
}

// showsHealth recognises the parent's update that reports its Deployment
// healthy (Current) or not.
func showsHealth(ev watch.Event, current bool) bool {
	vr, ok := ev.Object.(*v1alpha1.VidraResource)
	return ok && ev.Type == watch.Modified && reportsHealth(vr, current)
}

// reportsHealth reports whether vr's status says its Deployment is healthy
// (Current) or not, in the Healthy condition and in managedResources.
func reportsHealth(vr *v1alpha1.VidraResource, current bool) bool {
	want := metav1.ConditionFalse
	if current {
		want = metav1.ConditionTrue
	}
	cond := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionHealthy)
	if cond == nil || cond.Status != want {
		return false
	}
	for _, m := range vr.Status.ManagedResources {
		if m.Kind == "Deployment" {
			return (m.Health == "Current") == current
		}
	}
	return false
}

// measureChains creates plan.chains chains of plan.depth resources, each
// holding one ConfigMap and depending on the one before it. The dependents
// are created first and left blocked (DependencyNotReady); the clock starts
// when the heads are created, and every resource's Ready is taken from the
// benchmark's watch.
func measureChains(ctx context.Context, c *cluster, h *hub, plan healthPlan) (*chainResult, error) {
	res := &chainResult{Chains: plan.chains, Depth: plan.depth, Resources: plan.chains * plan.depth}
	vrs := c.vidra.InfrahubV1alpha1()
	if err := parallelDo(ctx, plan.chains*(plan.depth-1), 16, func(ctx context.Context, k int) error {
		vr := chainResource(k/(plan.depth-1), 1+k%(plan.depth-1))
		if _, err := vrs.VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for ch := range plan.chains {
		for k := 1; k < plan.depth; k++ {
			ns, name := nsName(chainPrefix, ch), linkName(k)
			if err := waitResource(ctx, c.vidra, ns, name, plan.timeout, func(vr *v1alpha1.VidraResource) bool {
				cond := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
				return cond != nil && cond.ObservedGeneration == vr.Generation && cond.Reason == v1alpha1.ReasonDependencyNotReady
			}); err != nil {
				return nil, fmt.Errorf("VidraResource %s/%s not blocked on its dependency within %s: %w", ns, name, plan.timeout, err)
			}
		}
	}
	if err := settle(ctx, c, 2*time.Second, time.Minute); err != nil {
		return nil, err
	}

	subs := make([][]*subscription, plan.chains)
	for ch := range plan.chains {
		subs[ch] = make([]*subscription, plan.depth)
		for k := range plan.depth {
			subs[ch][k] = h.subscribe("vidraresources", nsName(chainPrefix, ch), linkName(k))
		}
	}
	defer func() {
		for ch := range plan.chains {
			for k := range plan.depth {
				h.unsubscribe("vidraresources", nsName(chainPrefix, ch), linkName(k))
			}
		}
	}()
	audit := auditLog{c.auditLog}
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	mark, from := audit.mark(), time.Now()
	created := make([]time.Time, plan.chains)
	if err := parallelDo(ctx, plan.chains, plan.chains, func(ctx context.Context, ch int) error {
		vr := chainResource(ch, 0)
		created[ch] = time.Now()
		if _, err := vrs.VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	readyAt := make([][]time.Time, plan.chains)
	var first, last, firstCreate time.Time
	var heads, chains []float64
	for ch := range plan.chains {
		readyAt[ch] = make([]time.Time, plan.depth)
		if firstCreate.IsZero() || created[ch].Before(firstCreate) {
			firstCreate = created[ch]
		}
		for k := range plan.depth {
			at, ok := subs[ch][k].await(ctx, plan.timeout, func(ev watch.Event) bool {
				vr, ok := ev.Object.(*v1alpha1.VidraResource)
				return ok && isReady(vr)
			})
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !ok {
				res.NotReady++
				logf("  %s/%s: not Ready within %s", nsName(chainPrefix, ch), linkName(k), plan.timeout)
				continue
			}
			readyAt[ch][k] = at
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
			if k == 0 {
				heads = append(heads, ms(at.Sub(created[ch])))
				continue
			}
			if prev := readyAt[ch][k-1]; !prev.IsZero() {
				res.LinkLatenciesMs = append(res.LinkLatenciesMs, ms(at.Sub(prev)))
			}
		}
		if a, b := readyAt[ch][0], readyAt[ch][plan.depth-1]; !a.IsZero() && !b.IsZero() {
			chains = append(chains, ms(b.Sub(a)))
		}
	}
	if err := settle(ctx, c, time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	m1, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	to := time.Now()
	time.Sleep(time.Second) // the audit log trails the responses a little
	if res.Requests, err = audit.requests(operatorUser, mark, from, to); err != nil {
		return nil, err
	}
	res.ReconcilesByTrigger = metricsDelta{before: m0, after: m1}.byLabel("vidra_reconciles_total", "trigger")
	if !first.IsZero() {
		res.WallClockMs = ms(last.Sub(first))
		res.FromCreateMs = ms(last.Sub(firstCreate))
	}
	for _, l := range res.LinkLatenciesMs {
		res.SumOfLinksMs += l
	}
	res.SumOfLinksMs = round(res.SumOfLinksMs, 1)
	res.Link, res.Head, res.Chain = stats(res.LinkLatenciesMs), stats(heads), stats(chains)
	return res, nil
}

// isReady is what a dependent waits for, as the operator decides it:
// Ready=True for the current generation, not being deleted.
func isReady(vr *v1alpha1.VidraResource) bool {
	if vr.DeletionTimestamp != nil {
		return false
	}
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
}

// healthResource is VidraResource "app" of namespace health-i: one
// Deployment of one replica, Ready only once it is healthy.
func healthResource(i int) *v1alpha1.VidraResource {
	return &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: objName, Namespace: nsName(healthPrefix, i), Labels: map[string]string{benchLabel: healthPrefix}},
		Spec: v1alpha1.VidraResourceSpec{
			Wait: true,
			Manifest: fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`, objName),
		},
	}
}

func linkName(k int) string { return fmt.Sprintf("link-%02d", k) }

// chainResource is link k of chain ch: one ConfigMap, and a dependency on
// link k-1 of the same namespace.
func chainResource(ch, k int) *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: linkName(k), Namespace: nsName(chainPrefix, ch), Labels: map[string]string{benchLabel: chainPrefix}},
		Spec: v1alpha1.VidraResourceSpec{
			Manifest: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  link: %q\n", linkName(k), fmt.Sprint(k)),
		},
	}
	if k > 0 {
		vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: linkName(k - 1)}}
	}
	return vr
}

// deploymentWriter writes the status of the health resources' Deployments as
// the deployment controller would for one replica. Its timestamps are
// synthetic: each write moves lastUpdateTime on by a second, so that every
// write changes the object even when several land within one second
// (metav1.Time has whole seconds).
type deploymentWriter struct {
	kube kubernetes.Interface
	base time.Time
	// mu guards what follows: the resources are rolled out in parallel.
	mu        sync.Mutex
	tick      int
	gens      []int64
	available []bool
	since     []time.Time
}

// rollOut waits for resource i's Deployment to exist and writes its status
// rolled out and available.
func (w *deploymentWriter) rollOut(ctx context.Context, i int, timeout time.Duration) error {
	ns := nsName(healthPrefix, i)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := w.kube.AppsV1().Deployments(ns).Get(ctx, objName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		w.mu.Lock()
		w.gens[i] = d.Generation
		w.mu.Unlock()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("Deployment %s/%s not created within %s: %w", ns, objName, timeout, err)
	}
	return w.write(ctx, i, true)
}

// write sends resource i's Deployment a status with one replica, available
// or not (its Pod not ready: kstatus says InProgress, "Available: 0/1"). A
// write that keeps availability moves only the conditions' lastUpdateTime,
// which kstatus ignores. The merge patch names every field, zeros included,
// so that it replaces what the previous write set.
func (w *deploymentWriter) write(ctx context.Context, i int, available bool) error {
	w.mu.Lock()
	w.tick++
	now := w.base.Add(time.Duration(w.tick) * time.Second)
	if available != w.available[i] || w.since[i].IsZero() {
		w.available[i], w.since[i] = available, now
	}
	gen, since := w.gens[i], w.since[i]
	w.mu.Unlock()
	ready, status, reason, msg := 1, "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
	if !available {
		ready, status, reason, msg = 0, "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	}
	stamp := func(t time.Time) string { return t.Format(time.RFC3339) }
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration":  gen,
		"replicas":            1,
		"updatedReplicas":     1,
		"readyReplicas":       ready,
		"availableReplicas":   ready,
		"unavailableReplicas": 1 - ready,
		"conditions": []map[string]any{
			{"type": "Available", "status": status, "reason": reason, "message": msg,
				"lastUpdateTime": stamp(now), "lastTransitionTime": stamp(since)},
			{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
				"message":        fmt.Sprintf("ReplicaSet %q has successfully progressed.", objName+"-5d4f8c7b9"),
				"lastUpdateTime": stamp(now), "lastTransitionTime": stamp(w.base)},
		},
	}})
	if err != nil {
		return err
	}
	ns := nsName(healthPrefix, i)
	if _, err := w.kube.AppsV1().Deployments(ns).Patch(ctx, objName, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: deploymentFieldManager}, "status"); err != nil {
		return fmt.Errorf("status update of Deployment %s/%s: %w", ns, objName, err)
	}
	return nil
}

// keep writes resource i's Deployment status again with the same
// availability: only lastUpdateTime moves.
func (w *deploymentWriter) keep(ctx context.Context, i int) error {
	w.mu.Lock()
	available := w.available[i]
	w.mu.Unlock()
	return w.write(ctx, i, available)
}

// waitResource waits until VidraResource ns/name exists and ok accepts it.
func waitResource(ctx context.Context, vidra versioned.Interface, ns, name string, timeout time.Duration, ok func(*v1alpha1.VidraResource) bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && ok(vr), nil
	})
}

// waitResources waits until the resources name of namespaces prefix-0000 …
// prefix-(n-1) exist and ok accepts each.
func waitResources(ctx context.Context, vidra versioned.Interface, prefix string, n int, name string, timeout time.Duration, ok func(*v1alpha1.VidraResource) bool) error {
	return parallelDo(ctx, n, 8, func(ctx context.Context, i int) error {
		return waitResource(ctx, vidra, nsName(prefix, i), name, timeout, ok)
	})
}

// startResourceHub watches the health section's VidraResources, so that a
// status write of the operator is timed by its arrival, as drift repairs are.
func startResourceHub(ctx context.Context, vidra versioned.Interface) (*hub, error) {
	selector := fmt.Sprintf("%s in (%s,%s)", benchLabel, healthPrefix, chainPrefix)
	h := newHub()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return vidra.InfrahubV1alpha1().VidraResources("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return vidra.InfrahubV1alpha1().VidraResources("").Watch(ctx, o)
		},
	}
	if err := h.watchResource(ctx, "vidraresources", lw); err != nil {
		return nil, err
	}
	return h, nil
}

// metricsDelta is the change of the operator's metrics between two scrapes.
type metricsDelta struct {
	before, after testenv.Metrics
}

func (d metricsDelta) delta(name string, match map[string]string) float64 {
	return d.after.Sum(name, match) - d.before.Sum(name, match)
}

// byLabel is the delta of name by the values of one label; values that did
// not move are left out.
func (d metricsDelta) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range d.after[name] {
		v := s.Labels[label]
		if _, done := out[v]; done {
			continue
		}
		if x := d.delta(name, map[string]string{label: v}); x != 0 {
			out[v] = x
		}
	}
	return out
}
