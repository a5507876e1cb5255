// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// driftSample is one change made to the objects of resource i in ns.
type driftSample struct {
	ns  string
	i   int
	seq int
	// uid is the object's UID before a deletion; rv the resourceVersion the
	// change produced. Set by prepare and change.
	uid types.UID
	rv  string
}

// driftKind is one kind of external change and how its repair shows in the
// watch of the object.
type driftKind struct {
	name     string
	resource string
	object   string
	// prepare reads what recognising the repair needs; it is not timed.
	prepare func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error
	// change sends the one request that makes the drift, with the field
	// manager kubectl would use for it.
	change func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error
	// repaired recognises the event that shows the object restored.
	repaired func(ev watch.Event, s *driftSample) bool
}

// driftKinds are the four kinds of drift of issue 8: a deletion; an edit of
// a field the manifest sets, on an object without metadata.generation; an
// edit of a spec field through the scale subresource, as kubectl scale does
// it; and a hand edit that adds a field the manifest does not set.
func driftKinds() []driftKind {
	noPrepare := func(context.Context, kubernetes.Interface, *driftSample) error { return nil }
	return []driftKind{
		{
			name: "configmap-deleted", resource: "configmaps", object: configName,
			prepare: func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error {
				cm, err := kube.CoreV1().ConfigMaps(s.ns).Get(ctx, configName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				s.uid = cm.UID
				return nil
			},
			change: func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error {
				return kube.CoreV1().ConfigMaps(s.ns).Delete(ctx, configName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.uid}})
			},
			repaired: func(ev watch.Event, s *driftSample) bool {
				cm, ok := ev.Object.(*corev1.ConfigMap)
				return ok && ev.Type == watch.Added && cm.UID != s.uid
			},
		},
		{
			name: "configmap-data-edited", resource: "configmaps", object: configName,
			prepare: noPrepare,
			change: func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error {
				patch := fmt.Appendf(nil, `{"data":{%q:"edited-%d"}}`, configKey, s.seq)
				cm, err := kube.CoreV1().ConfigMaps(s.ns).Patch(ctx, configName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
				if err != nil {
					return err
				}
				s.rv = cm.ResourceVersion
				return nil
			},
			repaired: func(ev watch.Event, s *driftSample) bool {
				cm, ok := ev.Object.(*corev1.ConfigMap)
				return ok && ev.Type == watch.Modified && rvAfter(cm, s.rv) && cm.Data[configKey] == fmt.Sprintf("hello-%d", s.i)
			},
		},
		{
			name: "deployment-replicas-changed", resource: "deployments", object: objName,
			prepare: noPrepare,
			change: func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error {
				// The typed client would decode the Scale it answers with
				// into a Deployment; the REST client decodes what it gets.
				scale := &autoscalingv1.Scale{}
				err := kube.AppsV1().RESTClient().Patch(types.MergePatchType).Namespace(s.ns).Resource("deployments").Name(objName).
					SubResource("scale").Param("fieldManager", "kubectl-scale").Body([]byte(`{"spec":{"replicas":3}}`)).Do(ctx).Into(scale)
				if err != nil {
					return err
				}
				s.rv = scale.ResourceVersion
				return nil
			},
			repaired: func(ev watch.Event, s *driftSample) bool {
				d, ok := ev.Object.(*appsv1.Deployment)
				return ok && ev.Type == watch.Modified && rvAfter(d, s.rv) && d.Spec.Replicas != nil && *d.Spec.Replicas == 0
			},
		},
		{
			name: "service-label-added", resource: "services", object: objName,
			prepare: noPrepare,
			change: func(ctx context.Context, kube kubernetes.Interface, s *driftSample) error {
				patch := fmt.Appendf(nil, `{"metadata":{"labels":{"hand-made":"v%d"}}}`, s.seq)
				svc, err := kube.CoreV1().Services(s.ns).Patch(ctx, objName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"})
				if err != nil {
					return err
				}
				s.rv = svc.ResourceVersion
				return nil
			},
			repaired: func(ev watch.Event, s *driftSample) bool {
				svc, ok := ev.Object.(*corev1.Service)
				if !ok || ev.Type != watch.Modified || !rvAfter(svc, s.rv) {
					return false
				}
				_, labelled := svc.Labels["hand-made"]
				return !labelled
			},
		},
	}
}

// driftResult holds the repair latencies of one kind in one mode.
type driftResult struct {
	Samples    int         `json:"samples"`
	Repaired   int         `json:"repaired"`
	Unrepaired int         `json:"unrepaired"`
	Stats      latencyStat `json:"latencyMs"`
	// ChangeSeen is the part of the latency until the change itself arrived
	// on the benchmark's watch (the change request and the watch fan-out),
	// AfterChange the rest (the operator's reaction and repair, and the
	// fan-out of the repair).
	ChangeSeen  latencyStat `json:"changeSeenMs"`
	AfterChange latencyStat `json:"repairAfterChangeSeenMs"`
	// Requests are the operator's requests while this kind was sampled, from
	// the audit log: what one repair costs.
	Requests          requestCount `json:"operatorRequests"`
	RequestsPerRepair float64      `json:"operatorRequestsPerRepair"`
	// LatenciesMs are the samples in the order taken.
	LatenciesMs []float64 `json:"latenciesMs"`
	changeMs    []float64
	afterMs     []float64
}

// driftPlan says how drift is sampled.
type driftPlan struct {
	prefix  string
	n       int
	samples int
	timeout time.Duration
	// pause separates samples, so that the previous repair's status write
	// and Event are done and each sample meets an operator at rest.
	pause time.Duration
	// spread adds a random wait of up to spread before each change. The
	// periodic-only resources were created together and re-check in step;
	// without it every change would land at the same phase of their
	// interval, right after the re-check that repaired the previous one.
	spread time.Duration
}

// measureDrift changes the objects of the resources in namespaces
// prefix-0000 … prefix-(n-1), samples times per kind, one change at a time,
// and waits for each repair up to timeout. The latency is the arrival of the
// repairing watch event minus the moment just before the change request was
// sent.
func measureDrift(ctx context.Context, c *cluster, h *hub, plan driftPlan) (map[string]*driftResult, error) {
	kube := c.kube
	audit := auditLog{c.auditLog}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	prefix, n, samples, timeout, pause := plan.prefix, plan.n, plan.samples, plan.timeout, plan.pause
	out := map[string]*driftResult{}
	for k, kind := range driftKinds() {
		res := &driftResult{}
		out[kind.name] = res
		mark, from := audit.mark(), time.Now()
		for j := range samples {
			if plan.spread > 0 {
				select {
				case <-time.After(time.Duration(rng.Int64N(int64(plan.spread)))):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			i := (k*samples + j) % n
			s := &driftSample{ns: nsName(prefix, i), i: i, seq: j}
			if err := kind.prepare(ctx, kube, s); err != nil {
				return nil, fmt.Errorf("%s sample %d in %s: %w", kind.name, j, s.ns, err)
			}
			sub := h.subscribe(kind.resource, s.ns, kind.object)
			start := time.Now()
			if err := kind.change(ctx, kube, s); err != nil {
				h.unsubscribe(kind.resource, s.ns, kind.object)
				return nil, fmt.Errorf("%s sample %d in %s: %w", kind.name, j, s.ns, err)
			}
			at, ok := sub.await(ctx, timeout, func(ev watch.Event) bool { return kind.repaired(ev, s) })
			h.unsubscribe(kind.resource, s.ns, kind.object)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Samples++
			if !ok {
				res.Unrepaired++
				logf("  %s in %s: not repaired within %s", kind.name, s.ns, timeout)
				continue
			}
			res.Repaired++
			res.LatenciesMs = append(res.LatenciesMs, ms(at.Sub(start)))
			if seen, ok := sub.firstAt(); ok && seen.Before(at) {
				res.changeMs = append(res.changeMs, ms(seen.Sub(start)))
				res.afterMs = append(res.afterMs, ms(at.Sub(seen)))
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		time.Sleep(time.Second) // the audit log trails the responses a little
		reqs, err := audit.requests(operatorUser, mark, from, time.Now().Add(-time.Second))
		if err != nil {
			return nil, err
		}
		res.Requests = reqs
		if res.Repaired > 0 {
			res.RequestsPerRepair = round(float64(reqs.Total)/float64(res.Repaired), 2)
		}
		res.Stats = stats(res.LatenciesMs)
		res.ChangeSeen, res.AfterChange = stats(res.changeMs), stats(res.afterMs)
		logf("  %-28s n=%d p50=%.1fms p99=%.1fms max=%.1fms unrepaired=%d (p50 change seen after %.1fms, repaired %.1fms later; %s)",
			kind.name, res.Repaired, res.Stats.P50, res.Stats.P99, res.Stats.Max, res.Unrepaired, res.ChangeSeen.P50, res.AfterChange.P50, formatCounts(reqs.ByResource))
	}
	return out, nil
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 3) }
