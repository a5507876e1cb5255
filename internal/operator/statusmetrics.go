// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
)

// The alerts (docs/operations.md) ask how long a resource has not been
// Ready, how many are stalled or fight over fields, and how long a sync
// has failed compared with its interval: what the status conditions say,
// which counters cannot. statusCollector reads them from the informers'
// caches at each scrape (no request to the API server), and reports what
// is wrong per namespace, so that the series are bounded by the
// namespaces, not by the resources; what is well is counted once for the
// cluster. A fleet of healthy namespaces then costs a scrape a handful of
// series, not five per namespace: at 1,000 namespaces those took some 6
// MB of garbage and 20 ms of CPU a scrape (BenchmarkScrapeStatus), and
// read nothing an alert or a panel asks. A sync's series are per sync, as
// syncs are few and each has an interval of its own.
type statusCollector struct {
	resources func() []*v1alpha1.VidraResource
	// syncs is nil when the API server does not serve InfrahubSyncs.
	syncs func() []*v1alpha1.InfrahubSync
	// syncInterval is the interval of a sync that sets none.
	syncInterval func() time.Duration
	now          func() time.Time

	conditions, notReady, syncNotReady, intervalDesc *prometheus.Desc
}

func newStatusCollector(resources listers.VidraResourceLister, syncs listers.InfrahubSyncLister, syncInterval func() time.Duration) *statusCollector {
	c := &statusCollector{
		resources: func() []*v1alpha1.VidraResource {
			l, _ := resources.List(labels.Everything())
			return l
		},
		syncInterval: syncInterval,
		now:          time.Now,
		conditions: prometheus.NewDesc("vidra_resource_conditions",
			"VidraResources by condition type (Ready, Stalled, Conflict, Drifted), status and reason: by namespace where the status tells of a problem; those in the healthy status (Ready True, the others False) counted for the cluster, without a namespace.",
			[]string{"namespace", "type", "status", "reason"}, nil),
		notReady: prometheus.NewDesc("vidra_resource_not_ready_seconds",
			"The longest time a VidraResource of the namespace has not been Ready, by the Ready condition's last transition; only namespaces with one not Ready, suspended ones left out.",
			[]string{"namespace"}, nil),
		syncNotReady: prometheus.NewDesc("vidra_infrahubsync_not_ready_seconds",
			"How long the InfrahubSync has not been Ready (0 while it is), by the Ready condition's last transition.",
			[]string{"namespace", "name"}, nil),
		intervalDesc: prometheus.NewDesc("vidra_infrahubsync_interval_seconds",
			"The InfrahubSync's poll interval (spec.interval, or the operator's requeueSyncAfter).",
			[]string{"namespace", "name"}, nil),
	}
	if syncs != nil {
		c.syncs = func() []*v1alpha1.InfrahubSync {
			l, _ := syncs.List(labels.Everything())
			return l
		}
	}
	return c
}

// reportedConditions are the condition types vidra_resource_conditions
// counts: the ones an alert or a dashboard panel reads.
var reportedConditions = []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled, v1alpha1.ConditionConflict, v1alpha1.ConditionDrifted}

// healthy is the status of each reported condition that tells nothing is
// wrong: a resource in it is counted for the cluster, not its namespace.
func healthy(typ string, status metav1.ConditionStatus) bool {
	if typ == v1alpha1.ConditionReady {
		return status == metav1.ConditionTrue
	}
	return status == metav1.ConditionFalse
}

// Describe implements prometheus.Collector.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conditions
	ch <- c.notReady
	ch <- c.syncNotReady
	ch <- c.intervalDesc
}

// knownReasons are the condition reasons the operator writes. A reason
// label outside them is "other": status is the operator's to write, but
// whoever may write it otherwise must not be able to add series.
// TestKnownReasonsAreEveryReason keeps the list whole.
var knownReasons = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range []string{
		v1alpha1.ReasonAdopted,
		v1alpha1.ReasonAllCurrent,
		v1alpha1.ReasonApplyFailed,
		v1alpha1.ReasonArtifactsNotApplied,
		v1alpha1.ReasonCacheBudgetExceeded,
		v1alpha1.ReasonCredentialsUnavailable,
		v1alpha1.ReasonDegraded,
		v1alpha1.ReasonDeleting,
		v1alpha1.ReasonDependencyCycle,
		v1alpha1.ReasonDependencyNotReady,
		v1alpha1.ReasonDependencyRefused,
		v1alpha1.ReasonDestinationError,
		v1alpha1.ReasonDriftDetected,
		v1alpha1.ReasonFieldConflict,
		v1alpha1.ReasonForbidden,
		v1alpha1.ReasonHandedOver,
		v1alpha1.ReasonHandoverRefused,
		v1alpha1.ReasonHealthCheckFailed,
		v1alpha1.ReasonImmutableField,
		v1alpha1.ReasonImmutableSet,
		v1alpha1.ReasonInfrahubUnavailable,
		v1alpha1.ReasonInvalidManifest,
		v1alpha1.ReasonInvalidSource,
		v1alpha1.ReasonSourceUnavailable,
		v1alpha1.ReasonWebhookUnavailable,
		v1alpha1.ReasonManifestTooLarge,
		v1alpha1.ReasonManifestUnavailable,
		v1alpha1.ReasonNameTaken,
		v1alpha1.ReasonNamespaceNotFound,
		v1alpha1.ReasonNoConflict,
		v1alpha1.ReasonNoDrift,
		v1alpha1.ReasonNothingApplied,
		v1alpha1.ReasonOwnedByOther,
		v1alpha1.ReasonProgressing,
		v1alpha1.ReasonPruneFailed,
		v1alpha1.ReasonPruneHeld,
		v1alpha1.ReasonPruneRefused,
		v1alpha1.ReasonReconcileTimeout,
		v1alpha1.ReasonReconciled,
		v1alpha1.ReasonServiceAccountNotFound,
		v1alpha1.ReasonServiceAccountRequired,
		v1alpha1.ReasonSuspended,
		v1alpha1.ReasonSynced,
		v1alpha1.ReasonTooManyArtifacts,
		v1alpha1.ReasonTooManyKinds,
		v1alpha1.ReasonUnknownKind,
		v1alpha1.ReasonUnmanagedExists,
		v1alpha1.ReasonWaitingForCRD,
	} {
		m[r] = true
	}
	return m
}()

// reasonLabel is the reason label of a condition's reason.
func reasonLabel(reason string) string {
	if reason == "" || knownReasons[reason] {
		return reason
	}
	return "other"
}

// conditionKey is one series of vidra_resource_conditions; namespace is
// empty for the cluster's count of a healthy status.
type conditionKey struct{ namespace, typ, status, reason string }

// resourceStatus is what the collector reports of a set of resources: a
// pure function of them and the time, which the tests table. notReady
// holds only the namespaces with a resource not Ready.
func resourceStatus(resources []*v1alpha1.VidraResource, now time.Time) (counts map[conditionKey]int, notReady map[string]time.Duration) {
	counts = map[conditionKey]int{}
	notReady = map[string]time.Duration{}
	for _, vr := range resources {
		for _, typ := range reportedConditions {
			status, reason := metav1.ConditionUnknown, ""
			if cond := meta.FindStatusCondition(vr.Status.Conditions, typ); cond != nil {
				status, reason = cond.Status, reasonLabel(cond.Reason)
			} else if typ != v1alpha1.ConditionReady {
				continue
			}
			ns := vr.Namespace
			if healthy(typ, status) {
				ns = ""
			}
			counts[conditionKey{ns, typ, string(status), reason}]++
		}
		if age := notReadyFor(vr.Status.Conditions, vr.CreationTimestamp, now); age > notReady[vr.Namespace] && !vr.Spec.Suspend {
			notReady[vr.Namespace] = age
		}
	}
	return counts, notReady
}

// notReadyFor is how long the object has not been Ready: since the Ready
// condition left True, or since its creation when it has none yet.
func notReadyFor(conds []metav1.Condition, created metav1.Time, now time.Time) time.Duration {
	since := created.Time
	if cond := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); cond != nil {
		if cond.Status == metav1.ConditionTrue {
			return 0
		}
		since = cond.LastTransitionTime.Time
	}
	if since.IsZero() || now.Before(since) {
		return 0
	}
	return now.Sub(since)
}

// Collect implements prometheus.Collector.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	counts, notReady := resourceStatus(c.resources(), now)
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.conditions, prometheus.GaugeValue, float64(n), k.namespace, k.typ, k.status, k.reason)
	}
	for ns, age := range notReady {
		ch <- prometheus.MustNewConstMetric(c.notReady, prometheus.GaugeValue, age.Seconds(), ns)
	}
	if c.syncs == nil {
		return
	}
	def := c.syncInterval()
	for _, s := range c.syncs() {
		interval := def
		if s.Spec.Interval != nil && s.Spec.Interval.Duration > 0 {
			interval = s.Spec.Interval.Duration
		}
		ch <- prometheus.MustNewConstMetric(c.intervalDesc, prometheus.GaugeValue, interval.Seconds(), s.Namespace, s.Name)
		ch <- prometheus.MustNewConstMetric(c.syncNotReady, prometheus.GaugeValue,
			notReadyFor(s.Status.Conditions, s.CreationTimestamp, now).Seconds(), s.Namespace, s.Name)
	}
}

// leadingGauge is 1 while this replica reconciles (it leads, is a shard
// member, or runs without leader election): the sum over the replicas is
// the alert "no leader".
func leadingGauge(leading func() bool) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vidra_leading",
		Help: "1 while this replica reconciles (leads, is a shard member, or runs without leader election), else 0.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	})
}

// registerStatusMetrics registers vidra_leading and the status collector;
// syncsServed says whether InfrahubSyncs have a cache to read.
func (o *Operator) registerStatusMetrics(reg prometheus.Registerer, syncsServed bool) {
	var syncs listers.InfrahubSyncLister
	if syncsServed {
		syncs = o.factory.Infrahub().V1alpha1().InfrahubSyncs().Lister()
	}
	reg.MustRegister(leadingGauge(o.leading.Load),
		newStatusCollector(o.factory.Infrahub().V1alpha1().VidraResources().Lister(), syncs,
			func() time.Duration { return o.Config.Current().RequeueSyncAfter }))
}
