// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/events"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Options configure an Engine.
type Options struct {
	// Registry caches the managed objects the engine reads, and is told of
	// every write the engine makes so that it does not wake the writer.
	Registry *watchregistry.Registry[cache.ObjectName]
	// Wakes is where the engine records what each resource's pass had
	// watched, which the registry's callbacks read (WakesFrom, Declares);
	// nil means an index of the engine's own.
	Wakes *WakeIndex
	// Owners and Vidra find the VidraResource an object's marks name: the
	// cache first, the API server when the cache does not hold it. Vidra
	// also reads a resource's manifest, which the cache does not hold
	// (StripManifest), when its parse is not cached.
	Owners listers.VidraResourceLister
	Vidra  versioned.Interface
	// Resources reports whether a VidraResource of a UID exists in the
	// cluster Vidra runs in (exists), and whether the answer is complete
	// (known: the caller sees every VidraResource). An object whose marks
	// name a resource is adopted only when it is known to be gone; nil
	// knows nothing, so nothing is adopted.
	Resources func(types.UID) (exists, known bool)
	// Recorder records the Events of hand-overs; nil discards them.
	Recorder record.EventRecorder
	// Enqueue wakes a VidraResource an object was handed over to.
	Enqueue func(cache.ObjectName)
	// Home returns a client of the cluster Vidra runs in acting as a
	// resource's identity, which reads its spec.manifestFrom; Sources is
	// told what each resource reads, to wake it on a change. Nil Home
	// fails every resource that uses spec.manifestFrom.
	Home    func(context.Context, *v1alpha1.VidraResource) (dynamic.Interface, error)
	Sources SourceWatch
	// Local is the operator's own metadata client of the cluster it runs
	// in, which tells whether a ServiceAccount a pass acts as exists; nil
	// never asks.
	Local metadata.Interface
	// Registerer receives the engine's metrics; nil registers none.
	Registerer prometheus.Registerer
	Clock      clock.Clock
}

// Engine applies VidraResources' manifests with server-side apply: it
// applies each object, compares live objects with desired ones from the
// watch registry's caches, takes back hand edits, prunes what left a
// manifest, and remembers between passes what it applied.
type Engine struct {
	registry  *watchregistry.Registry[cache.ObjectName]
	wakes     *WakeIndex
	owners    listers.VidraResourceLister
	resources func(types.UID) (exists, known bool)
	vidra     versioned.Interface
	events    events.Recorder
	enqueue   func(cache.ObjectName)
	metrics   *metrics
	clock     clock.Clock
	manifests *manifestSource
	local     metadata.Interface

	mu       sync.Mutex
	states   map[cache.ObjectName]*resourceState
	managers labelSet
	kinds    labelSet
}

// New builds an Engine.
func New(opts Options) *Engine {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.Enqueue == nil {
		opts.Enqueue = func(cache.ObjectName) {}
	}
	if opts.Wakes == nil {
		opts.Wakes = NewWakeIndex()
	}
	return &Engine{
		registry:  opts.Registry,
		wakes:     opts.Wakes,
		owners:    opts.Owners,
		resources: opts.Resources,
		vidra:     opts.Vidra,
		events:    events.New(opts.Recorder),
		enqueue:   opts.Enqueue,
		metrics:   newMetrics(opts.Registerer),
		clock:     opts.Clock,
		local:     opts.Local,
		manifests: &manifestSource{parsed: newParseCache(), vidra: opts.Vidra, home: opts.Home, watch: opts.Sources},
		states:    map[cache.ObjectName]*resourceState{},
		managers:  labelSet{max: maxManagerLabels},
		kinds:     labelSet{max: maxKindLabels},
	}
}

// Forget drops everything the engine holds for a VidraResource that is
// gone: what it applied, its claims, its parsed manifest.
func (e *Engine) Forget(key cache.ObjectName) {
	e.manifests.parsed.forget(key)
	if e.manifests.watch != nil {
		e.manifests.watch.Forget(key)
	}
	e.wakes.forget(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.states, key)
}

// Pass is one reconcile's work on the objects of one VidraResource: what it
// is given, and what it did (Out).
type Pass struct {
	VR *v1alpha1.VidraResource
	// Target is where the objects go; nil until the destination resolved.
	Target *destination.Target
	// Inventory is the resource's inventory on Target's cluster:
	// status.managedResources, or nothing once the objects of a previous
	// destination have been let go (Leave).
	Inventory []v1alpha1.ManagedResource
	Out       Outcome

	key       cache.ObjectName
	st        *resourceState
	overrides []string
	// claims are the objects found owned by another live VidraResource,
	// with the resource this one declares them as.
	claims map[ObjectKey]schema.GroupVersionResource
	// report: driftPolicy Report, drift is listed rather than corrected.
	report bool
}

// NewPass starts a pass over vr's objects. overrides are the field managers
// whose edits are taken back (config overrideManagers).
func (e *Engine) NewPass(vr *v1alpha1.VidraResource, overrides []string) *Pass {
	key := cache.MetaObjectToName(vr)
	st := e.stateFor(key, vr.UID)
	st.load(vr)
	return &Pass{VR: vr, Inventory: vr.Status.ManagedResources, key: key, st: st, overrides: overrides,
		report: vr.ReportsDrift(),
		Out:    Outcome{Inventory: vr.Status.ManagedResources, Drift: vr.Status.Drift, DriftHistory: st.history}}
}

// Contended lists, sorted, the objects of the pass's resource another writer
// keeps changing back, and forgets corrections that left the window.
func (p *Pass) Contended(now time.Time) []string { return p.st.contended(now) }

// Outcome is what a pass did and what went wrong.
type Outcome struct {
	// Recreated counts objects deleted and created again (spec.force),
	// among Created.
	Changed, Created, Configured, Recreated int
	// Drifted describes the objects restored; DriftDeleted and DriftEdited
	// count them among Created and Configured.
	Drifted                   []string
	DriftDeleted, DriftEdited int
	Pruned                    []string
	// Released are objects that left the manifest and stay, without
	// Vidra's marks (spec.prune false); Kept those their prune: disabled
	// annotation kept.
	Released, Kept []string
	// Drift is the drift listed under driftPolicy Report, sorted, and
	// NewDrift describes what became drift in this pass.
	Drift    []v1alpha1.DriftRecord
	NewDrift []string
	// DriftHistory is the last corrections, newest first.
	DriftHistory []v1alpha1.DriftRecord
	Errs         []*ObjectError
	// Held are the inventory entries that left the manifest and were not
	// pruned because a failure could be confused with them (prunehold.go),
	// in the inventory's order.
	Held []PruneHold
	// Inventory is the status.managedResources to write.
	Inventory []v1alpha1.ManagedResource
	// Behind: spec.destination moved, and the objects on the previous
	// destination could not all be let go yet; Inventory is still on that
	// cluster.
	Behind bool
	// Sources are the references of spec.manifestFrom the pass read, with
	// the sums of their content: status.manifestFrom once the pass
	// succeeds.
	Sources []v1alpha1.AppliedSource
}

// Retryable reports whether the pass failed, and every failure may go away
// on a retry.
func (o *Outcome) Retryable() bool {
	for _, e := range o.Errs {
		if !e.Retry {
			return false
		}
	}
	return len(o.Errs) > 0
}

// Fail adds a failure that concerns the whole resource (Index -1).
func (o *Outcome) Fail(reason string, retry bool, err error) {
	o.Errs = append(o.Errs, &ObjectError{Index: -1, Reason: reason, Retry: retry, Err: err})
}

// Released is how many objects the cleanup of vr has let go so far without
// deleting them (kept by their annotation, or handed over to another
// VidraResource): the rest of its inventory was deleted, or was gone.
func (e *Engine) Released(vr *v1alpha1.VidraResource) int {
	return e.stateFor(cache.MetaObjectToName(vr), vr.UID).released
}
