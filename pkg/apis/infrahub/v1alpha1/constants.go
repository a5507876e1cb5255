// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// Marks Vidra puts on the objects it manages and on VidraResources.
const (
	// ManagedByLabel is set to ManagedByValue on every managed object; it is
	// the label selector of Vidra's watches.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "vidra"
	// OwnerUIDLabel carries the UID of the VidraResource that manages the
	// object. Prune and delete only touch objects whose label matches.
	OwnerUIDLabel = "vidraresource.infrahub.operators.com/owner-uid"
	// BucketLabel carries the bucket (0–255) of the managing
	// VidraResource, a hash of its namespace and name: the replicas of a
	// sharded operator each watch the objects of their own buckets only.
	BucketLabel = "vidraresource.infrahub.operators.com/bucket"
	// OwnedByAnnotation carries <namespace>/<name> of the managing
	// VidraResource; watch events are mapped back to it through this.
	OwnedByAnnotation = "vidraresource.infrahub.operators.com/owned-by"
	// Finalizer holds a VidraResource until its managed objects are deleted or
	// orphaned, per its deletion policy.
	Finalizer = "vidraresource.infrahub.operators.com/finalizer"
	// RequestedAtAnnotation asks for an immediate reconcile; its value is
	// echoed into status.lastHandledReconcileAt.
	RequestedAtAnnotation = "vidra.infrahub.operators.com/requested-at"
	// ApplyPolicyAnnotation on an object of a manifest: IfNotPresent
	// creates it when it is missing and never changes it afterwards; Ignore
	// makes Vidra leave it alone: never applied, pruned or deleted.
	ApplyPolicyAnnotation = "vidra.infrahub.operators.com/apply"
	// PrunePolicyAnnotation on an object of a manifest: disabled keeps it
	// when it leaves the manifest or the resource is deleted (released,
	// without Vidra's marks, instead of deleted).
	PrunePolicyAnnotation = "vidra.infrahub.operators.com/prune"
	// ForcePolicyAnnotation on an object of a manifest: enabled recreates it
	// when a change hits an immutable field, as spec.force does for all.
	ForcePolicyAnnotation = "vidra.infrahub.operators.com/force"
	// CleanupRequeuedAtAnnotation is set by Vidra, at a time (RFC 3339),
	// on a CustomResourceDefinition whose deletion it waits for and whose
	// removal the API server's own finalizer has put off: writing it
	// requeues that finalizer at once (see internal/apply/crdcleanup.go).
	CleanupRequeuedAtAnnotation = "vidra.infrahub.operators.com/cleanup-requeued-at"
	// FieldManager is the field manager of Vidra's server-side applies, and
	// of nothing else: an object counts as written by Vidra only through an
	// Apply entry of this manager in its managedFields.
	FieldManager = "vidra"
)

// Field managers of Vidra's writes other than applies. Each has a name of
// its own so that no such write (an Update in managedFields) can pass for
// an apply of FieldManager.
const (
	// ReleaseFieldManager strips Vidra's marks from an object it releases
	// (prune false, deletion policy Orphan).
	ReleaseFieldManager = "vidra-release"
	// HandoverFieldManager rewrites the marks of an object handed from a
	// VidraResource that lets it go to another that declares it too.
	HandoverFieldManager = "vidra-handover"
	// DriftFieldManager takes back hand-edited labels, annotations and field
	// ownership before an apply restores the rest.
	DriftFieldManager = "vidra-drift"
	// FinalizerFieldManager adds and removes Vidra's finalizer on
	// VidraResources.
	FinalizerFieldManager = "vidra-finalizer"
	// CleanupFieldManager writes CleanupRequeuedAtAnnotation on a
	// CustomResourceDefinition Vidra deleted.
	CleanupFieldManager = "vidra-cleanup"
	// StatusFieldManager writes the status of VidraResources.
	StatusFieldManager = "vidra-status"
	// LeaderElectionFieldManager is the field manager, and user agent, of
	// the operator's leader-election Lease writes.
	LeaderElectionFieldManager = "vidra-leader-election"
)

// Condition types of VidraResource status, kstatus-compatible.
const (
	// ConditionReady is True when every object is applied and in sync.
	ConditionReady = "Ready"
	// ConditionReconciling is True while Vidra works toward the desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change by a person
	// (bad input, missing permission), not a retry.
	ConditionStalled = "Stalled"
	// ConditionConflict is True when another writer or another VidraResource
	// contends for objects of this manifest.
	ConditionConflict = "Conflict"
	// ConditionDrifted is True, with driftPolicy Report, while managed
	// objects differ from the manifest because someone else changed them.
	ConditionDrifted = "Drifted"
	// ConditionCacheLimited is True, with reason CacheBudgetExceeded,
	// while the objects of the resource's namespace exceed the byte budget
	// of what the operator caches for it: the objects past it are read
	// from the API server instead.
	ConditionCacheLimited = "CacheLimited"
	// ConditionHealthy summarises the health of the managed objects: True
	// when every one is Current (reason AllCurrent), False while some are in
	// progress (Progressing) or when some failed (Degraded), Unknown when
	// the resource failed before it managed any object (NothingApplied).
	ConditionHealthy = "Healthy"
)

// Condition reasons. They are constant so that alerts and scripts can match
// on them; the condition message carries the detail.
const (
	ReasonReconciled        = "Reconciled"
	ReasonProgressing       = "Progressing"
	ReasonSuspended         = "Suspended"
	ReasonInvalidManifest   = "InvalidManifest"
	ReasonUnknownKind       = "UnknownKind"
	ReasonNamespaceNotFound = "NamespaceNotFound"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonImmutableField    = "ImmutableField"
	ReasonForbidden         = "Forbidden"
	ReasonOwnedByOther      = "OwnedByOtherResource"
	ReasonUnmanagedExists   = "UnmanagedObjectExists"
	ReasonFieldConflict     = "FieldConflict"
	ReasonNoConflict        = "NoConflict"
	ReasonPruneFailed       = "PruneFailed"
	ReasonDeleting          = "Deleting"
	ReasonDestinationError  = "DestinationUnavailable"
	ReasonManifestTooLarge  = "ManifestTooLarge"
	// ReasonCacheBudgetExceeded: see ConditionCacheLimited.
	ReasonCacheBudgetExceeded = "CacheBudgetExceeded"
	// ReasonManifestUnavailable: the manifest could not be read (the
	// operator's cache holds none; it reads the resource when it needs
	// it); retried with backoff.
	ReasonManifestUnavailable = "ManifestUnavailable"
	ReasonWaitingForCRD       = "WaitingForCRD"
	ReasonDependencyNotReady  = "DependencyNotReady"
	// ReasonReconcileTimeout: the reconcile ran out of its time
	// (--reconcile-timeout) before it went through every object; it goes on
	// with backoff.
	ReasonReconcileTimeout = "ReconcileTimeout"
	// ReasonAllCurrent: every managed object is healthy.
	ReasonAllCurrent = "AllCurrent"
	// ReasonNothingApplied: the resource manages no object because it
	// failed before any applied; Ready says why.
	ReasonNothingApplied = "NothingApplied"
	// ReasonDegraded: a managed object failed (kstatus Failed).
	ReasonDegraded = "Degraded"
	// ReasonHealthCheckFailed: with spec.wait, the objects were not healthy
	// within spec.timeout.
	ReasonHealthCheckFailed = "HealthCheckFailed"
	// ReasonDependencyCycle: spec.dependsOn leads back to the resource.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonDependencyRefused: spec.dependsOn names a resource the operator
	// does not let this one depend on (another namespace).
	ReasonDependencyRefused = "DependencyRefused"
	// ReasonServiceAccountRequired: the resource is outside the trusted
	// namespaces and names no ServiceAccount to act as, so nothing is applied.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
	// ReasonServiceAccountNotFound: the ServiceAccount the resource acts as
	// does not exist, so the API server refuses every write as it.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	// ReasonPruneRefused: a Namespace or CRD left the manifest, and pruning
	// it would delete everything inside it; spec.pruneNamespacesAndCRDs
	// allows it.
	ReasonPruneRefused = "PruneRefused"
	// ReasonDriftDetected: with driftPolicy Report, objects differ from
	// the manifest; status.drift lists them.
	ReasonDriftDetected = "DriftDetected"
	// ReasonNoDrift: every object is as the manifest says.
	ReasonNoDrift = "NoDrift"
	// ReasonHandedOver: an object left this resource (pruned, or the
	// resource deleted) while another VidraResource declares it; it was
	// handed to that resource, not deleted.
	ReasonHandedOver = "HandedOver"
	// ReasonHandoverRefused: an object left a resource while another
	// VidraResource declares it, but that resource's identity may not patch
	// and delete it, so it was deleted (or released) as if nobody declared
	// it, rather than handed over.
	ReasonHandoverRefused = "HandoverRefused"
	// ReasonAdopted: an object the manifest declares carried the marks of
	// a VidraResource that no longer exists; with spec.adoptOrphans this
	// resource applied it and now manages it.
	ReasonAdopted = "Adopted"
	// ReasonTooManyKinds: watching the kinds of the resource's objects
	// would take more informers than the operator runs for its namespace,
	// for its destination cluster or in all (--max-informers-per-namespace,
	// --max-informers-per-cluster, --max-informers); the message names the
	// bound and its number.
	ReasonTooManyKinds = "TooManyKinds"
	// ReasonPruneHeld: objects that left the manifest were not pruned
	// because an object of the same kind and name fails (it may be one of
	// them, moved), or a failure leaves the manifest's objects unknown.
	// The Event of this reason, and the Ready message, name them.
	ReasonPruneHeld = "PruneHeld"
	// ReasonImmutableSet: someone other than Vidra made a ConfigMap or
	// Secret Vidra owns immutable, which its manifest does not ask; with
	// spec.force it is recreated, else reported naming the field manager.
	ReasonImmutableSet = "ImmutableSet"
)

// ResourcePlural is the resource name of VidraResources in API paths, for
// clients that address them without the typed clientset (metadata-only
// writes, dynamic clients).
const ResourcePlural = "vidraresources"

// ReasonSourceUnavailable: a ConfigMap or Secret of spec.manifestFrom is
// missing, lacks the key named, or the resource's identity may not read
// it; the message names it. Nothing is applied or pruned until it can be
// read; retried with backoff, and at once when it changes.
const ReasonSourceUnavailable = "ManifestSourceUnavailable"
