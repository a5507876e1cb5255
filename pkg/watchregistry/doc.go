// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package watchregistry runs the informers of an operator that manages
// objects of kinds it only learns about at run time, one informer per
// (cluster, resource, namespace scope) that its owners need, and wakes the
// right owner within milliseconds when someone else changes or deletes one of
// its objects. It knows nothing of any particular operator: owners are keys
// of any comparable type K, such as cache.ObjectName of a custom resource.
//
// # Using it
//
// Create a Registry with New, giving it a Map function (object → owner keys,
// e.g. from a label or annotation the operator puts on what it manages) and an
// Enqueue function (typically a workqueue's Add). Give it clients with
// SetCluster("", dyn, md) for the local cluster and SetCluster(name, ...) for
// others, and start it with Start(ctx), which returns at once (Done is closed
// once it has stopped), or with the blocking Run(ctx).
//
// In each reconcile of an owner, after applying its objects, call
// Track(owner, refs) with every Ref the owner's objects live in; when the
// owner goes away, call Forget(owner). Track replaces the owner's whole set,
// so calling it on every reconcile is cheap and correct. A namespaced Ref is
// served by a running all-namespaces informer of the same cluster and
// resource rather than by a second one. Read actual state with Get and List,
// or GetInto, GetTyped and ListTyped for typed objects (Has to look for an
// object without decoding it), which serve the
// informer caches and never block (WaitForSync blocks until a ref has
// synced):
//
//   - ErrForbidden or ErrGone (errors.Is): the client may not list the
//     resource, or it no longer exists (a deleted CRD). The informer has
//     stopped instead of retrying forever and the owners were told with
//     EventStateChanged; report it. Track retries once a backoff has
//     passed, or set Options.RetryFailed and the registry retries by
//     itself. While it retries, the error matches ErrNotSynced too (check
//     ErrForbidden first), and each failed retry tells the owners again.
//   - ErrNotSynced: the informer is still listing; return, the owner is
//     enqueued with EventInitialList once the cache is ready.
//   - ErrOverBudget: the ref's cluster went over its Budget and is held;
//     report it. It is retried after the hold (see StateOverBudget).
//   - apierrors.IsNotFound: the object does not exist.
//
// So that the owner is not woken by its own writes, declare each write with
// BeginWrite before sending it and end it with the API server's answer
// (Write.Done) or the error (Write.Abort), and call ExpectDelete with the
// object before deleting it (UnexpectDelete if the delete then fails,
// AwaitDelete if a finalizer holds the object and the owner waits for it to
// go); expectations belong to the object, whichever
// informer delivers its events. The watch often delivers a write's event
// before the answer reaches the writer: while a write is in flight, the
// events of its object are held, for Options.WriteHold at most, and once it
// ends the one at the write's version is dropped and the others are
// delivered. ExpectWrite, called after a write with its answer, still
// works for a writer that cannot declare it first; Options.FieldManager
// then recognises creations by their managedFields.
//
// # Objects you do not own
//
// An owner that must be woken when objects it does not own change (the
// Secrets a ConfigMap names) declares them as Interests: one object by
// namespace and name, or the objects a label selector selects, within a
// Ref. Interests.Set returns the refs to Track, and Interests.Map, as
// Options.Map, maps each event to the interested owners; the operator keeps
// no index of its own. An interest by a label selector gets an informer of
// that selector (Ref.LabelSelector), shared by the interests that name it,
// so it sees the objects others label whatever the registry's own scope;
// an interest by name sees what the registry's informers cache in full, so
// a registry naming objects the operator does not label runs without a
// label selector (MetadataOnly keeps it small).
//
// # What is delivered
//
// Updates whose resourceVersion did not change (resyncs), updates that only
// touch status and bookkeeping metadata (unless Options.DeliverStatusOnly),
// the owner's announced writes and events that Map maps to nobody are
// filtered and counted by reason. Options.WakeDigest reduces each object to
// a number, such as a hash of its health, and a status-only update that
// changes it is delivered as EventDigestChanged rather than filtered, so an
// owner is woken on the transitions it waits on and not on status churn.
// Everything else is delivered: spec changes, ConfigMap and Secret data,
// label and annotation edits, and deletes (with the last known object;
// tombstones are unwrapped). The objects of a new
// informer's initial list are not delivered one by one: each owner is
// enqueued once with EventInitialList when the informer has synced.
//
// # Lifecycle
//
// An informer starts when the first owner tracks its ref and keeps running
// while any owner does. When the last one leaves it lingers for
// Options.Linger, then stops. Informers are single-use: a stopped informer is
// never handed out again, a ref that is tracked anew gets a fresh one. On
// 403 or 404 from list or watch the informer stops at once (state Forbidden or
// Gone), and with Options.RetryFailed a fresh one follows after a backoff.
// Replacing or removing a cluster's clients stops its informers (state
// Stopped) and tells their owners. A cluster given a Budget (SetCluster's
// WithBudget) whose caches would hold more objects, or bytes (MaxBytes),
// than it allows has all its informers stopped (state OverBudget,
// ErrOverBudget) and none started again for a hold that doubles each
// time, so that a hostile API server can neither exhaust the operator's
// memory nor make it list in a loop. An all-namespaces informer that has synced
// takes over the namespaced refs of its cluster and resource, failed ones
// included, whose own informers stop.
//
// # Memory
//
// Every informer is scoped by Options.LabelSelector, so only managed objects
// are cached; the informer of a ref with a LabelSelector of its own is
// scoped by that one instead. SetLabelSelectors changes the scope at run time; adding
// selectors adds an informer per selector and ref, and lists only the
// objects they add; Prepare lists them ahead, out of sight until
// SetLabelSelectors adds them. By default each object is trimmed before caching by
// DropManagedFields (metadata.managedFields and kubectl's last-applied
// annotation); KeepManagedFieldsOf keeps the entries of chosen field
// managers, AsServed keeps everything. Options.MetadataOnly caches only apiVersion, kind and metadata.
// Options.Charge holds chosen objects as stubs of their identity and a few
// marks (Get fails with ErrStub), and charges the others to a Budget of its
// choice, which holds what it has no room for as stubs too.
// The caches hold each object as JSON, with only the metadata that keys,
// filters and label selectors need kept decoded, which is several times
// smaller than an Unstructured. Get and List therefore decode a fresh copy on
// every call, which the caller may mutate; each delivered event carries its
// own copy, shared by Map and that event's Enqueue calls.
//
// # Concurrency
//
// All methods are safe for concurrent use. No registry lock is held while Map
// or Enqueue run or while anything waits for an informer, so Map may call
// Track or Forget. Events of one informer are delivered in order, one at a
// time; events of different informers concurrently. Events held for a write
// in flight are the exception: they are delivered, in order, by the
// goroutine that ends the write (or by the registry's loop once the hold
// has passed), possibly while the informer delivers others.
//
// # Observability
//
// Stats returns informers by state, owners, cached objects, events
// received, delivered and filtered by reason, and histograms of sync
// duration and handler lag; package promcollector reports the same figures
// to Prometheus (a module of its own, so that the registry needs no metrics
// library). Refs, Owners, Snapshot and Snapshots describe who tracks what
// and each ref's informer.
//
// # Testing
//
// Package fake makes client-go's fake dynamic client bump resourceVersions,
// without which the registry filters every update through it as a resync.
package watchregistry
