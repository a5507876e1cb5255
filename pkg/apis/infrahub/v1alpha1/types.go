// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vr,categories=vidra
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].reason`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.deployState`
// +kubebuilder:printcolumn:name="Managed",type=integer,JSONPath=`.status.managedCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// VidraResource is a set of Kubernetes manifests that Vidra applies to a
// destination cluster with server-side apply, keeps there by correcting drift,
// prunes as objects leave the set, and cleans up when it is deleted.
type VidraResource struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state: the manifests and where and how to apply them.
	Spec VidraResourceSpec `json:"spec"`
	// Status is what Vidra last observed and did.
	// +optional
	Status VidraResourceStatus `json:"status,omitempty"`
}

// DeletionPropagation says how an object Vidra deletes takes its
// dependents along (spec.deletionPropagation).
type DeletionPropagation string

const (
	// DeletionPropagationBackground deletes the object at once; the
	// garbage collector deletes its dependents after.
	DeletionPropagationBackground DeletionPropagation = "Background"
	// DeletionPropagationForeground keeps the object, being deleted, until
	// the garbage collector has deleted its dependents.
	DeletionPropagationForeground DeletionPropagation = "Foreground"
)

// DeletionPolicy says what happens to the managed objects when their
// VidraResource is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes every managed object before the finalizer
	// is removed.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the managed objects in place and strips
	// Vidra's labels and annotation from them.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// MaxManifestBytes bounds spec.manifest, in bytes of UTF-8; the CRD's rule
// on the field says the same number, and the operator checks it too, for
// resources stored before the rule was. A VidraResource is one value in
// etcd, whose requests are limited to 1.5 MiB: the status takes up to
// 512 KiB (its inventory, drift records and health messages, which others
// write), the metadata up to 256 KiB (the API server's limit on
// annotations), and 768 KiB is what remains. A manifest that needs more
// is split into several resources, ordered with spec.dependsOn.
const MaxManifestBytes = 768 << 10

// ManifestTooLargeMessage is what the CRD answers to a longer manifest,
// and the operator's condition says after the size it found.
const ManifestTooLargeMessage = "must be at most 786432 bytes (768 KiB): split the objects into several VidraResources, ordered with spec.dependsOn where one needs another"

// VidraResourceSpec is the desired state of a VidraResource.
// +kubebuilder:validation:XValidation:rule="(has(self.manifest) && size(self.manifest) > 0) || (has(self.manifestFrom) && size(self.manifestFrom) > 0)",message="spec.manifest and spec.manifestFrom may not both be empty: give the objects in one of them"
type VidraResourceSpec struct {
	// Manifest holds the desired objects: multi-document YAML, or JSON (one
	// object, a JSON array of objects, or a v1 List), at most 786432 bytes
	// (768 KiB, MaxManifestBytes) of UTF-8; with manifestEncoding
	// gzip+base64, that text gzip-compressed and base64-encoded. It may be
	// empty when manifestFrom is not.
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 786432",message="must be at most 786432 bytes (768 KiB): split the objects into several VidraResources, ordered with spec.dependsOn where one needs another"
	// +optional
	Manifest string `json:"manifest,omitempty"`

	// ManifestEncoding says how spec.manifest is written: empty for the
	// text itself, gzip+base64 for the text gzip-compressed, then
	// base64-encoded. Decompressed, it obeys the same bounds as any
	// manifest (docs/bundles.md).
	// +kubebuilder:validation:Enum="";gzip+base64
	// +optional
	ManifestEncoding ManifestEncoding `json:"manifestEncoding,omitempty"`

	// ManifestFrom are ConfigMaps and Secrets of the VidraResource's
	// namespace whose documents follow spec.manifest's, in this order, read
	// with the resource's identity (spec.serviceAccountName must be able
	// to get them). A reference without a key takes every key of the
	// object, in the order of their names. A key holding gzip data (in
	// binaryData, named *.gz, or starting with gzip's magic number) is
	// decompressed within bounds. A change of a referenced object applies
	// again. At most 16 references (MaxManifestSources).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ManifestFrom []ManifestSource `json:"manifestFrom,omitempty"`

	// Destination says which cluster receives the objects and how.
	// +optional
	Destination Destination `json:"destination,omitempty"`

	// Interval is the period of the safety-net re-check, as a Go duration
	// ("10m", "1h30m"); "0" turns it off for this resource. Unset means the
	// operator's requeueResourcesAfter setting.
	// Anything but "0" must be at least 1s: a shorter period would make one
	// resource a reconcile loop.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '0' || (self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && (duration(self) == duration('0s') || duration(self) >= duration('1s')))",message="must be a Go duration of at least 1s, such as 30s, 10m or 1h30m (a number needs its unit), or 0 to turn the re-check off"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// ServiceAccountName makes every read and write on the destination
	// impersonate this ServiceAccount of the VidraResource's namespace. Unset
	// means the operator's --default-service-account; when that is unset too,
	// the operator's own identity in its trusted namespaces
	// (--trusted-namespaces, by default its own), and anywhere else nothing
	// is applied (ServiceAccountRequired).
	// It is a ServiceAccount name (a DNS-1123 subdomain), never a user or
	// group name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a ServiceAccount of this namespace, such as deployer: lowercase letters, digits, '-' and '.', not a user name such as system:serviceaccount:<namespace>:<name>"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Prune deletes objects that leave the manifest. Only objects carrying
	// this resource's owner-uid label are ever pruned.
	// +kubebuilder:default=true
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// PruneNamespacesAndCRDs lets prune delete a Namespace or a
	// CustomResourceDefinition that left the manifest. Deleting either
	// deletes everything inside it, whoever owns it, so it is refused
	// (and reported) unless this is true.
	// +optional
	PruneNamespacesAndCRDs bool `json:"pruneNamespacesAndCRDs,omitempty"`

	// DeletionPolicy is Delete (remove the managed objects, then the
	// finalizer) or Orphan (leave them, without Vidra's marks).
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// DeletionPropagation is how an object Vidra deletes, pruned or with
	// the resource, takes its dependents along: Background (the default)
	// deletes it at once and leaves its dependents (a Deployment's
	// ReplicaSets and Pods) to the garbage collector; Foreground keeps it,
	// being deleted, until they are gone, so that the resource's deletion
	// ends only once they are. An object recreated for an immutable change
	// is always deleted in the background, to be created again at once.
	// +kubebuilder:validation:Enum=Background;Foreground
	// +optional
	DeletionPropagation DeletionPropagation `json:"deletionPropagation,omitempty"`

	// AdoptOrphans lets this resource take over an object it declares that
	// carries the marks of a VidraResource that is gone (deleted while its
	// finalizer could not run, say with the operator uninstalled), on the
	// cluster Vidra runs in, when Vidra's own apply wrote it. Off, such an
	// object is reported UnmanagedObjectExists and left alone: whoever may
	// create an object can write marks and a field manager's name, so a
	// leftover cannot be told from an object made to look like one. Set it
	// while taking over leftovers, and unset it after.
	// +optional
	AdoptOrphans bool `json:"adoptOrphans,omitempty"`

	// Suspend stops reconciling this resource, and its watches, until it is
	// set back to false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Force recreates an object whose change the API server refuses because
	// it touches an immutable field.
	// +optional
	Force bool `json:"force,omitempty"`

	// Wait makes Ready mean running rather than applied: Ready is True only
	// once every managed object is healthy (kstatus Current: a Deployment
	// rolled out, a Job complete, a PVC bound, a custom resource Ready).
	// Health is reported in status whether or not Wait is set.
	// +optional
	Wait bool `json:"wait,omitempty"`

	// Timeout is how long Vidra waits, with Wait, for the objects of a new
	// manifest to become healthy before Ready turns False with reason
	// HealthCheckFailed; a change of the manifest starts a new wait.
	// Default 5m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="must be a Go duration of at least 1s, such as 30s, 5m or 1h"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// DependsOn are VidraResources that must be Ready before this one
	// applies anything; with their Wait set, that means healthy. Vidra is
	// woken the moment a dependency becomes Ready. A dependency in another
	// namespace is refused unless the operator allows it
	// (--allow-cross-namespace-dependencies).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`

	// DriftPolicy is what Vidra does when someone else changes a managed
	// object: Correct (restore it, the default) or Report (list the change in
	// status.drift, set the Drifted condition, and leave it). Changes of the
	// manifest are applied either way.
	// +kubebuilder:validation:Enum=Correct;Report
	// +optional
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// Ignore hands fields of managed objects to other writers (an autoscaler
	// on /spec/replicas, a webhook on an annotation): Vidra never changes
	// them, and a change of them by anyone is not drift. A field the
	// manifest also sets is given that value when Vidra creates the object,
	// and keeps whatever value it has afterwards.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Ignore []IgnoreRule `json:"ignore,omitempty"`
}

// ManifestEncoding says how spec.manifest is encoded.
// +kubebuilder:validation:Enum="";gzip+base64
type ManifestEncoding string

// ManifestEncodingGzipBase64 is a manifest gzip-compressed, then
// base64-encoded (standard alphabet, with padding).
const ManifestEncodingGzipBase64 ManifestEncoding = "gzip+base64"

// MaxManifestSources bounds spec.manifestFrom: each reference costs a read
// on every reconcile whose parse is not cached, and a watch.
const MaxManifestSources = 16

// ManifestSource names one ConfigMap or Secret, and optionally one of its
// keys, of the VidraResource's namespace; exactly one of configMapRef and
// secretRef is set.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="set exactly one of configMapRef and secretRef"
type ManifestSource struct {
	// ConfigMapRef names a ConfigMap.
	// +optional
	ConfigMapRef *SourceKeyReference `json:"configMapRef,omitempty"`
	// SecretRef names a Secret.
	// +optional
	SecretRef *SourceKeyReference `json:"secretRef,omitempty"`
}

// SourceKeyReference names an object of the same namespace and optionally
// one of its keys.
type SourceKeyReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of an object of this namespace: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`
	// Key of the object's data (or binaryData) to read; empty reads every
	// key, in the order of their names.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// AppliedSource is one reference of spec.manifestFrom as the last
// successful reconcile read it.
type AppliedSource struct {
	// Kind is ConfigMap or Secret.
	Kind string `json:"kind"`
	// Name of the object.
	Name string `json:"name"`
	// Key read; empty when every key was.
	// +optional
	Key string `json:"key,omitempty"`
	// SHA256 is "sha256:" and the hex SHA-256 of the content read, as
	// stored (before decompression), keys in the order read.
	SHA256 string `json:"sha256"`
}

// DriftPolicy says what Vidra does about changes others make to managed
// objects.
// +kubebuilder:validation:Enum=Correct;Report
type DriftPolicy string

const (
	// DriftPolicyCorrect restores drifted objects as soon as drift is seen.
	DriftPolicyCorrect DriftPolicy = "Correct"
	// DriftPolicyReport lists drifted objects in status and leaves them.
	DriftPolicyReport DriftPolicy = "Report"
)

// IgnoreRule names fields, by JSON pointer, of the managed objects a target
// selects.
type IgnoreRule struct {
	// Target selects the objects of the manifest the rule applies to; an
	// empty target selects every object.
	// +optional
	Target IgnoreTarget `json:"target,omitempty"`
	// Paths are JSON pointers (RFC 6901) into the objects, such as
	// /spec/replicas or /metadata/annotations/sidecar.istio.io~1status,
	// at most 32 steps deep; a number selects a list item by position.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^(/([^~/]|~[01])*){1,32}$')",message="must be a JSON pointer such as /spec/replicas, at most 32 steps deep: a / before each step, and ~ only as ~0 (for ~) or ~1 (for /), as in /metadata/annotations/example.com~1key"
	// +listType=atomic
	// +required
	Paths []string `json:"paths"`
}

// IgnoreTarget selects objects of a manifest; every field set must match.
type IgnoreTarget struct {
	// Group of the objects' API version; empty matches every group.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the objects.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the objects.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
	// Namespace of the objects, as applied.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector selects objects by the labels of the manifest, in
	// kubectl's syntax ("app=web,tier!=db").
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// DependencyReference names a VidraResource another depends on.
type DependencyReference struct {
	// Name of the VidraResource.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Namespace of the VidraResource; empty means the dependent's own.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be the name of a namespace, such as demo: lowercase letters, digits and '-'"
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Destination selects the cluster and default namespace for the objects.
type Destination struct {
	// Server is the API server URL of the destination. Empty or
	// https://kubernetes.default.svc means the cluster Vidra runs in.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || isURL(self)",message="must be empty or an absolute URL such as https://cluster.example.com:6443"
	// +optional
	Server string `json:"server,omitempty"`

	// Namespace is given to namespaced objects that carry none. Empty means
	// the VidraResource's own namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be the name of a namespace, such as demo: lowercase letters, digits and '-'"
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// ReconcileOnEvents corrects drift as soon as a watch reports it (true)
	// or only on the interval (false). Unset means the operator's
	// eventBasedReconcile setting.
	// +optional
	ReconcileOnEvents *bool `json:"reconcileOnEvents,omitempty"`

	// KubeconfigSecretRef names a Secret in the VidraResource's namespace
	// holding a kubeconfig for Server.
	// +optional
	KubeconfigSecretRef *SecretKeyReference `json:"kubeconfigSecretRef,omitempty"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret of this namespace: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`
	// Key in the Secret's data that holds the kubeconfig.
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// DeployState is a one-word summary of a VidraResource for people and
// printer columns; the conditions carry the detail.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Stale
type DeployState string

const (
	// DeployStatePending means nothing was applied yet.
	DeployStatePending DeployState = "Pending"
	// DeployStateRunning means a reconcile is under way or waiting to retry.
	DeployStateRunning DeployState = "Running"
	// DeployStateSucceeded means every object is applied and in sync.
	DeployStateSucceeded DeployState = "Succeeded"
	// DeployStateFailed means the last reconcile failed; see the conditions.
	DeployStateFailed DeployState = "Failed"
	// DeployStateStale means reconciling is suspended, so the destination may
	// have drifted.
	DeployStateStale DeployState = "Stale"
)

// VidraResourceStatus is what Vidra last observed and did.
type VidraResourceStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready, Reconciling, Stalled,
	// Conflict, Healthy (the managed objects' health) and Drifted (drift
	// left in place under driftPolicy Report).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DeployState summarises the conditions in one word.
	// +optional
	DeployState DeployState `json:"deployState,omitempty"`

	// ManagedResources is the inventory: every object Vidra applied for this
	// resource and will prune or delete.
	// +listType=atomic
	// +optional
	ManagedResources []ManagedResource `json:"managedResources,omitempty"`

	// InventoryCluster is the cluster the objects of ManagedResources live
	// on. When spec.destination moves to another cluster, Vidra prunes (or
	// releases) them there before it forgets them.
	// +optional
	InventoryCluster *ClusterReference `json:"inventoryCluster,omitempty"`

	// ManagedCount is the number of entries in ManagedResources, for the
	// printer column.
	// +optional
	ManagedCount int32 `json:"managedCount,omitempty"`

	// ManifestFrom records, per reference of spec.manifestFrom, the content
	// the last successful reconcile applied.
	// +listType=atomic
	// +optional
	ManifestFrom []AppliedSource `json:"manifestFrom,omitempty"`

	// LastSyncTime is when an apply last changed the destination.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// LastHandledReconcileAt echoes the value of the requested-at annotation
	// that the last reconcile handled; a value longer than 256 bytes is
	// echoed as its start, cut at a character boundary, and "...", 256
	// bytes at most.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// HealthCheckStartTime is when Vidra began waiting for the objects of
	// the observed generation to become healthy: spec.timeout runs from
	// here.
	// +optional
	HealthCheckStartTime *metav1.Time `json:"healthCheckStartTime,omitempty"`

	// Drift lists, with driftPolicy Report, the managed objects that differ
	// from the manifest because someone else changed them.
	// +listType=atomic
	// +optional
	Drift []DriftRecord `json:"drift,omitempty"`

	// DriftHistory holds the last 10 drift corrections, newest first: who
	// keeps changing what.
	// +listType=atomic
	// +optional
	DriftHistory []DriftRecord `json:"driftHistory,omitempty"`

	// Omitted counts what this status leaves out of what the last reconcile
	// found, to stay within 512 KiB as JSON, the names of ManagedResources
	// aside (they are the manifest's): the resource is stored whole,
	// manifest included, and etcd refuses one over 1.5 MiB. Past the limit,
	// the oldest corrections of DriftHistory go first, then the last
	// records of Drift, then health messages are shortened. Absent when
	// nothing is left out.
	// +optional
	Omitted *StatusOmissions `json:"omitted,omitempty"`
}

// StatusOmissions counts what a status leaves out.
type StatusOmissions struct {
	// Drift counts the objects that differ from the manifest but are not in
	// the Drift list: those past its first 100, or past the size limit. The
	// Drifted condition counts them all.
	// +optional
	Drift int32 `json:"drift,omitempty"`
	// DriftHistory counts the corrections, of the last 10, that the
	// DriftHistory list leaves out: the oldest.
	// +optional
	DriftHistory int32 `json:"driftHistory,omitempty"`
	// HealthMessages counts the health messages of ManagedResources that
	// are shortened, all to the same length, ending with "…".
	// +optional
	HealthMessages int32 `json:"healthMessages,omitempty"`
}

// DriftRecord is one change someone else made to a managed object.
type DriftRecord struct {
	// APIVersion of the object.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Fields are the fields that differ from the manifest, or that a hand
	// edit added, as JSON pointers (the form spec.ignore takes). Empty when
	// the object was deleted.
	// +listType=atomic
	// +optional
	Fields []string `json:"fields,omitempty"`
	// Deleted is true when the object was deleted.
	// +optional
	Deleted bool `json:"deleted,omitempty"`
	// Manager is the field manager that made the change ("kubectl-edit"),
	// when the object's managedFields tell; 128 bytes at most, as the API
	// server allows, ending with "…" when cut.
	// +optional
	Manager string `json:"manager,omitempty"`
	// Time is when the change was made, as far as the object tells (its
	// managedFields), else when Vidra saw it.
	Time metav1.Time `json:"time"`
}

// ClusterReference names a destination cluster as spec.destination does.
type ClusterReference struct {
	// Server is the API server URL; empty means the cluster Vidra runs in.
	// +optional
	Server string `json:"server,omitempty"`
	// KubeconfigSecretRef is the kubeconfig Secret used to reach Server.
	// +optional
	KubeconfigSecretRef *SecretKeyReference `json:"kubeconfigSecretRef,omitempty"`
}

// ManagedResource identifies one object of the inventory.
type ManagedResource struct {
	// APIVersion of the object, group/version or v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Health is the object's health in kstatus' terms: Current,
	// InProgress, Failed, Terminating, NotFound or Unknown. Objects without
	// a status of their own (ConfigMaps, RBAC) are Current once applied.
	// +optional
	Health string `json:"health,omitempty"`
	// HealthMessage says why the object is not Current, in 200 bytes at
	// most; shorter, ending with "…", when the status would otherwise be
	// over its size limit (see VidraResourceStatus.Omitted).
	// +optional
	HealthMessage string `json:"healthMessage,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VidraResourceList is a list of VidraResources.
type VidraResourceList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VidraResources.
	Items []VidraResource `json:"items"`
}
