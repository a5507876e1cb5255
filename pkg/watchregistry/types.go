// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Ref names what an owner needs watched: one resource of one cluster, in one
// namespace or in all of them, in the registry's scope or that of a label
// selector of its own. The registry runs at most one informer per
// distinct Ref, however many owners track it, and none for a namespaced Ref
// that a running all-namespaces informer of the same cluster and resource
// already covers.
type Ref struct {
	// Cluster names a cluster registered with SetCluster; "" is the local
	// cluster.
	Cluster string
	// GVR is the watched resource, e.g. {Version: "v1", Resource: "configmaps"}.
	GVR schema.GroupVersionResource
	// Namespace scopes the watch to one namespace; "" means all namespaces,
	// and is the only valid scope for cluster-scoped resources.
	Namespace string
	// LabelSelector, when not empty, scopes the ref's informer to the
	// objects it selects in place of the registry's scope
	// (Options.LabelSelector, SetLabelSelectors, Prepare, which leave it
	// alone): a ref that sees objects the registry's selectors do not
	// list, such as those an Interest selects. It is part of the ref's
	// identity: the owners tracking the same ref share its informer, and an
	// all-namespaces ref serves the namespaced refs of its own selector
	// only. It must be in the canonical form of labels.Selector.String(), so
	// that one selector written two ways is not two informers.
	LabelSelector string
}

// String renders the ref for logs and error messages, e.g.
// "configmaps.v1 in namespace team-a of the local cluster".
func (r Ref) String() string {
	res := r.GVR.Resource + "." + r.GVR.Version
	if r.GVR.Group != "" {
		res += "." + r.GVR.Group
	}
	scope := "all namespaces"
	if r.Namespace != "" {
		scope = "namespace " + r.Namespace
	}
	cluster := "the local cluster"
	if r.Cluster != "" {
		cluster = "cluster " + r.Cluster
	}
	if r.LabelSelector != "" {
		return fmt.Sprintf("%s selected by %q in %s of %s", res, r.LabelSelector, scope, cluster)
	}
	return fmt.Sprintf("%s in %s of %s", res, scope, cluster)
}

// MaxRefSelectorBytes bounds Ref.LabelSelector.
const MaxRefSelectorBytes = 4096

func (r Ref) withoutSelector() Ref {
	r.LabelSelector = ""
	return r
}

// allNamespaces returns the ref of the same cluster and resource in all
// namespaces: the informer that may serve r.
func (r Ref) allNamespaces() Ref {
	r.Namespace = ""
	return r
}

func (r Ref) validate() error {
	if r.GVR.Version == "" || r.GVR.Resource == "" {
		return fmt.Errorf("ref %s: GVR needs a version and a resource", r)
	}
	if len(r.LabelSelector) > MaxRefSelectorBytes {
		// Every list and watch of the informer carries it in its URL: a
		// selector taken from a user must not grow requests without bound.
		return fmt.Errorf("ref %s: label selector of %d bytes, more than %d", r.withoutSelector(), len(r.LabelSelector), MaxRefSelectorBytes)
	}
	if r.LabelSelector != "" {
		sel, err := labels.Parse(r.LabelSelector)
		if err != nil {
			return fmt.Errorf("ref %s: label selector: %w", r, err)
		}
		if sel.Empty() || sel.String() != r.LabelSelector {
			return fmt.Errorf("ref %s: label selector not in its canonical form %q (labels.Selector.String())", r, sel.String())
		}
	}
	return nil
}

// EventType says why an owner is enqueued.
type EventType string

const (
	// EventAdded reports an object created after the informer's initial list.
	EventAdded EventType = "Added"
	// EventUpdated reports a change other than a status-only one (unless
	// Options.DeliverStatusOnly) and other than the owner's own write.
	EventUpdated EventType = "Updated"
	// EventDigestChanged reports a status-only update, which would have been
	// filtered, whose Options.WakeDigest differs from the previous
	// version's: the condition the owner watches (its health, say) changed
	// while nothing else did. Old is set as for EventUpdated. An update that
	// changes more than status is an EventUpdated whatever its digest.
	EventDigestChanged EventType = "DigestChanged"
	// EventDeleted reports a deleted object; Object is its last known state.
	EventDeleted EventType = "Deleted"
	// EventInitialList is delivered once per owner when a new informer has
	// synced, in place of one EventAdded per listed object. Map sees it with
	// each listed object; Enqueue gets it with a nil Object.
	EventInitialList EventType = "InitialList"
	// EventStateChanged tells the owners of a ref that its informer became
	// Forbidden, Gone or OverBudget, or was stopped because its cluster was
	// replaced or removed; a Forbidden or Gone ref tells them again each
	// time a retry fails. Object is nil; Err is the ref's error, as Get
	// returns it.
	EventStateChanged EventType = "StateChanged"
)

// Event is what Map and Enqueue receive.
type Event struct {
	// Ref is the ref of the informer the event came from. For an
	// EventStateChanged it is the ref the owner tracks; for other events it
	// may be the all-namespaces ref of an informer that serves the owner's
	// namespaced ref.
	Ref Ref
	// Type is the kind of event.
	Type EventType
	// Object is the new object, or the last known object for deletes
	// (tombstones are unwrapped); nil for EventStateChanged and for the
	// EventInitialList handed to Enqueue. It is decoded from the cache for
	// this event and not shared with it, but Map and every Enqueue of the
	// event receive the same one: mutate only a copy.
	Object *unstructured.Unstructured
	// Old is the previous object of an EventUpdated or EventDigestChanged,
	// decoded like Object.
	Old *unstructured.Unstructured
	// Err is, for an EventStateChanged, the ref's error: a *StateError
	// matching ErrForbidden, ErrGone, ErrStopped, ErrOverBudget or
	// ErrRefused, as Get returns it. Nil for other events.
	Err error
}

// State is the lifecycle state of the informer behind a Ref.
type State string

const (
	// StatePending means the informer was asked for but has not synced yet
	// (or the registry is not running yet).
	StatePending State = "Pending"
	// StateSynced means the cache holds a full list and follows the watch.
	StateSynced State = "Synced"
	// StateForbidden means the client may not list or watch the resource; the
	// informer stopped instead of retrying. Track the ref again to retry, for
	// example once RBAC grants access.
	StateForbidden State = "Forbidden"
	// StateGone means the resource does not exist (404), typically because its
	// CustomResourceDefinition was deleted; the informer stopped. Track the ref
	// again once the CRD is back.
	StateGone State = "Gone"
	// StateStopped means the informer was stopped because its cluster was
	// replaced or removed, or the registry shut down.
	StateStopped State = "Stopped"
	// StateOverBudget means the informer was stopped, with every other
	// informer of its cluster, because their caches would have held more
	// objects than the cluster's Budget allows. No informer of the cluster
	// starts again before a hold has passed: 30 s, doubling with each
	// consecutive time, up to Options.RetryMaxDelay. Then, with
	// Options.RetryFailed, the registry retries by itself; otherwise the
	// next Track of the ref does.
	StateOverBudget State = "OverBudget"
	// StateRefused means the informer was stopped because its cluster's
	// own client refused its list or watch (an error matching ErrRefused),
	// such as a client that bounds the watches it holds open: retrying at
	// once would be refused again, and a reflector retries forever. The
	// ref's owners are told, and Track does not start it again before a
	// hold has passed: 30 s, doubling with each consecutive refusal, up to
	// Options.RetryMaxDelay. With Options.RetryFailed the registry retries
	// by itself once the hold has passed.
	StateRefused State = "Refused"
	// StateNotTracked is reported for a ref nobody tracks and no informer
	// lingers for.
	StateNotTracked State = "NotTracked"
)

// failed reports the states whose informer has ended and must be replaced by
// a fresh one when the ref is tracked again: informers are single-use.
func (s State) failed() bool {
	return s == StateForbidden || s == StateGone || s == StateStopped || s == StateOverBudget || s == StateRefused
}

// retried reports the failures that a fresh informer may meet again, and
// of which the owners are told only once (see entry.notified).
func (s State) retried() bool {
	return s == StateForbidden || s == StateGone || s == StateOverBudget || s == StateRefused
}

// FilterReason says why an event was not delivered.
type FilterReason string

const (
	// FilterResync counts updates whose resourceVersion did not change
	// (informer resyncs and relists of unchanged objects).
	FilterResync FilterReason = "resync"
	// FilterStatusOnly counts updates that changed nothing but status and
	// bookkeeping metadata (resourceVersion, managedFields, and generation
	// unless MetadataOnly), and, with Options.WakeDigest, left the digest
	// unchanged.
	FilterStatusOnly FilterReason = "status-only"
	// FilterOwnWrite counts events of the owners' own writes: declared with
	// BeginWrite and ended with Write.Done, or announced by ExpectWrite or
	// ExpectDelete.
	FilterOwnWrite FilterReason = "own-write"
	// FilterUnmapped counts events for which Map returned no owner.
	FilterUnmapped FilterReason = "unmapped"
	// FilterRejected counts events of objects Options.Keep rejected.
	FilterRejected FilterReason = "rejected"
)

var filterReasons = [...]FilterReason{FilterResync, FilterStatusOnly, FilterOwnWrite, FilterUnmapped, FilterRejected}

// eventTypes are the types of delivered events; receivedTypes those the
// informers produce, of which a digest change is not one: it is an update
// the handler delivers under another type.
var (
	eventTypes    = [...]EventType{EventAdded, EventUpdated, EventDigestChanged, EventDeleted, EventInitialList, EventStateChanged}
	receivedTypes = [...]EventType{EventAdded, EventUpdated, EventDeleted, EventInitialList, EventStateChanged}
)

var states = [...]State{StatePending, StateSynced, StateForbidden, StateGone, StateStopped, StateOverBudget, StateRefused}

var (
	// ErrNotSynced is returned by Get and List while the informer of a ref
	// has not completed its initial list. They never block: the owners of the
	// ref receive EventInitialList once it has synced. While a ref that
	// failed is retried, the error joins ErrNotSynced with the last failure
	// (errors.Is matches both, e.g. ErrForbidden), and if the retry fails
	// too its owners receive EventStateChanged.
	ErrNotSynced = errors.New("informer has not synced yet")
	// ErrForbidden is matched (errors.Is) by the error of a ref whose informer
	// was refused list or watch; the error also wraps the API server's
	// Forbidden error.
	ErrForbidden = errors.New("list or watch is forbidden")
	// ErrGone is matched (errors.Is) by the error of a ref whose resource the
	// API server does not serve (any more); the error also wraps the API
	// server's NotFound error.
	ErrGone = errors.New("resource is not served")
	// ErrNotTracked is returned for a ref that no owner tracks and for which no
	// informer lingers.
	ErrNotTracked = errors.New("ref is not tracked")
	// ErrStopped is returned for a ref whose informer was stopped with its
	// cluster, and by Track once the registry has shut down.
	ErrStopped = errors.New("informer stopped")
	// ErrClusterScoped is matched by the error of a Track that gave a
	// namespace to a cluster-scoped resource (see Options.IsNamespaced).
	ErrClusterScoped = errors.New("resource is cluster-scoped: track it with an empty namespace")
	// ErrOverBudget is matched (errors.Is) by the error of a ref whose
	// informer was stopped because its cluster's caches went over their
	// Budget; the error also wraps a *BudgetError.
	ErrOverBudget = errors.New("over the object budget")
	// ErrRefused is matched (errors.Is) by the error of a ref whose
	// informer was stopped because its cluster's own client refused a list
	// or watch (StateRefused). A client's RoundTripper makes the registry
	// stop an informer rather than let it retry by returning an error
	// whose Is matches ErrRefused.
	ErrRefused = errors.New("refused by the cluster's client")
)

// StateError is the error of a ref whose informer ended: errors.Is matches
// ErrForbidden, ErrGone, ErrStopped, ErrOverBudget or ErrRefused by State, and errors.As
// or apierrors helpers (apierrors.IsForbidden, IsNotFound) see the API error
// it wraps.
type StateError struct {
	// Ref is the ref whose informer ended.
	Ref Ref
	// State is StateForbidden, StateGone, StateStopped, StateOverBudget or
	// StateRefused.
	State State
	// Err is the API error that ended the informer, the *BudgetError of
	// StateOverBudget, or the client's error of StateRefused; nil for
	// StateStopped.
	Err error
}

// Error implements error.
func (e *StateError) Error() string {
	msg := fmt.Sprintf("watch %s: %s", e.Ref, e.sentinel())
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches the sentinel of the state.
func (e *StateError) Is(target error) bool { return target == e.sentinel() }

// Unwrap returns the API error.
func (e *StateError) Unwrap() error { return e.Err }

func (e *StateError) sentinel() error {
	switch e.State {
	case StateForbidden:
		return ErrForbidden
	case StateGone:
		return ErrGone
	case StateOverBudget:
		return ErrOverBudget
	case StateRefused:
		return ErrRefused
	default:
		return ErrStopped
	}
}

// RefSnapshot describes one tracked ref (or one lingering informer) at a
// moment, for status pages, debugging and tests.
type RefSnapshot struct {
	// Ref is the tracked ref.
	Ref Ref
	// ServedBy is the ref of the informer that serves it: Ref itself, or the
	// all-namespaces ref of a wider informer of the same cluster and resource.
	ServedBy Ref
	// State is the state of that informer.
	State State
	// Objects counts the objects in that informer's cache (the whole cache
	// when a wider informer serves the ref), rejected stubs included.
	Objects int
	// Owners counts the owners tracking Ref; zero for a lingering informer.
	Owners int
	// LingeringSince is when the informer's last owner left; zero while it
	// has owners.
	LingeringSince time.Time
	// LastError is the StateError of a failed informer, nil otherwise.
	LastError error
	// StartedAt and SyncedAt are when the informer started and completed its
	// initial list, zero until then; after SetLabelSelectors widened the
	// scope, when the informers of the added selectors started and listed.
	StartedAt, SyncedAt time.Time
	// NextRetry is when a failed informer is retried (Options.RetryFailed);
	// zero when no retry is scheduled.
	NextRetry time.Time
	// HeldUntil is, for a ref in StateOverBudget, when the hold of its
	// cluster ends: no informer of the cluster starts before; for a ref in
	// StateRefused, when Track may start it again. Zero otherwise.
	HeldUntil time.Time
}
