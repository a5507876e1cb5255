// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ihs,categories=vidra
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.syncState`
// +kubebuilder:printcolumn:name="Artifacts",type=integer,JSONPath=`.status.artifactCount`
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.spec.source.targetBranch`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// InfrahubSync turns the artifacts an Infrahub artifact definition renders
// into VidraResources: one per artifact, named after its id, owned by the
// sync, its manifest the artifact's content.
type InfrahubSync struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which Infrahub, which artifacts and what the generated
	// VidraResources get.
	Spec InfrahubSyncSpec `json:"spec"`
	// Status is what Vidra last found in Infrahub and applied.
	// +optional
	Status InfrahubSyncStatus `json:"status,omitempty"`
}

// InfrahubSyncSpec is the desired state of an InfrahubSync.
type InfrahubSyncSpec struct {
	// Source says where the artifacts come from.
	// +required
	Source InfrahubSource `json:"source"`

	// Destination is given to every generated VidraResource as its
	// spec.destination.
	// +optional
	Destination Destination `json:"destination,omitempty"`

	// Interval is the period of the poll of Infrahub, a Go duration of at
	// least 1s. Unset means the operator's requeueSyncAfter setting (1m by
	// default), or 10m with a webhook. Polls are spread by up to 10 %.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="must be a Go duration of at least 1s, such as 30s, 1m or 1h"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// QueryName is the stored query (a CoreGraphQLQuery in Infrahub) that
	// lists the artifacts, given the variable artifactname. Unset means
	// the operator's queryName setting (ArtifactIDs by default).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_.-]+$')",message="must be the name of a stored query: letters, digits, '_', '-' and '.'"
	// +optional
	QueryName string `json:"queryName,omitempty"`

	// Webhook lets Infrahub's signed artifact webhooks wake the sync (at
	// /hooks/infrahub/{namespace}/{name} of the operator's receiver); the
	// poll stays, every 10m by default, for deletions and lost deliveries.
	// +optional
	Webhook *WebhookSpec `json:"webhook,omitempty"`

	// Template is what each generated VidraResource gets besides its
	// manifest and destination.
	// +optional
	Template VidraResourceTemplate `json:"template,omitempty"`

	// Suspend stops polling Infrahub until it is set back to false. The
	// generated VidraResources keep being reconciled.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// InfrahubSource names an Infrahub, a branch and the artifacts to take.
// +kubebuilder:validation:XValidation:rule="has(self.artefactName) || has(self.definitionName)",message="name the artifacts: set artefactName (the artifact definition's artifact_name) or definitionName"
type InfrahubSource struct {
	// InfrahubAPIURL is the base URL of Infrahub, such as
	// https://infrahub.example.com. Plain http:// is refused unless the
	// operator runs with --allow-http-destinations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('https://') || self.startsWith('http://'))",message="must be an absolute http(s) URL such as https://infrahub.example.com"
	// +required
	InfrahubAPIURL string `json:"infrahubAPIURL"`

	// TargetBranch is the Infrahub branch to read.
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=250
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9_./-]*$') && !self.contains('..')",message="must be a branch name: letters, digits, '_', '-', '.' and '/'"
	// +optional
	TargetBranch string `json:"targetBranch,omitempty"`

	// TargetDate reads Infrahub as it was at that time: an RFC 3339 time
	// or date (2025-01-31, 2025-01-31T12:00:00Z), or a time ago ("2h",
	// "30m", "now-2h"). Forms Infrahub would refuse or misread, such as
	// "now+2h" (read as two hours ago) or "2d" (days are not supported),
	// are refused.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(now-)?[0-9]{1,9}(s|sec|second|seconds|m|min|minute|minutes|h|hour|hours)$') || self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\\\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$')",message="must be an RFC 3339 time or date such as 2025-01-31T12:00:00Z, or a time ago such as 2h, 30m or now-2h (days and now+ are not understood by Infrahub)"
	// +optional
	TargetDate string `json:"targetDate,omitempty"`

	// ArtefactName is the artifact_name of the artifact definition whose
	// artifacts are taken (the earlier operator's spelling, kept).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ArtefactName string `json:"artefactName,omitempty"`

	// DefinitionName takes the artifacts of the artifact definition of
	// this name, asked with Vidra's own GraphQL query.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	DefinitionName string `json:"definitionName,omitempty"`

	// CredentialsSecretRef names a Secret of the sync's namespace holding
	// username and password, or token (sent as X-INFRAHUB-KEY). Outside the
	// trusted namespaces it is read only if
	// spec.template.serviceAccountName may get it.
	// +optional
	CredentialsSecretRef *LocalSecretReference `json:"credentialsSecretRef,omitempty"`

	// CASecretRef names a key of a Secret of the sync's namespace holding
	// the PEM certificates of a private CA that signs Infrahub's
	// certificate; unset means the system's roots.
	// +optional
	CASecretRef *CASecretReference `json:"caSecretRef,omitempty"`
}

// WebhookSpec configures the webhooks of an InfrahubSync.
type WebhookSpec struct {
	// SecretRef names a Secret of the sync's namespace whose key
	// sharedKey is the shared_key of the CoreStandardWebhook in Infrahub.
	// Outside the trusted namespaces it is read only if
	// spec.template.serviceAccountName may get it.
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`
}

// WebhookSharedKey is the key of the webhook Secret holding the shared key.
const WebhookSharedKey = "sharedKey"

// DefaultWebhookInterval is the poll of a sync with a webhook: a safety net
// for deletions (Infrahub sends no artifact-deleted event) and deliveries
// that never came.
const DefaultWebhookInterval = 10 * time.Minute

// LocalSecretReference names a Secret in the same namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret of this namespace: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`
}

// CASecretReference names the key of a Secret that holds CA certificates.
type CASecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret of this namespace: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`
	// Key of the Secret's data holding the certificates.
	// +kubebuilder:default=ca.crt
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// VidraResourceTemplate is what each VidraResource an InfrahubSync
// generates gets; the fields mean what they mean on a VidraResource.
type VidraResourceTemplate struct {
	// Labels are added to every generated VidraResource, beside the label
	// naming the sync.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="label keys must be at most 317 bytes (prefix and name) and values at most 63"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// ServiceAccountName is the ServiceAccount of the sync's namespace the
	// generated VidraResources act as. Outside the trusted namespaces it is
	// required, and the credentials Secret is read only if it may get it.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a ServiceAccount of this namespace, such as deployer"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Prune is the generated VidraResources' spec.prune.
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// DeletionPolicy is the generated VidraResources' spec.deletionPolicy.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// DriftPolicy is the generated VidraResources' spec.driftPolicy.
	// +optional
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`

	// Ignore is the generated VidraResources' spec.ignore.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Ignore []IgnoreRule `json:"ignore,omitempty"`

	// Wait is the generated VidraResources' spec.wait.
	// +optional
	Wait bool `json:"wait,omitempty"`

	// Timeout is the generated VidraResources' spec.timeout.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="must be a Go duration of at least 1s, such as 30s, 5m or 1h"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Interval is the generated VidraResources' spec.interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '0' || (self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && (duration(self) == duration('0s') || duration(self) >= duration('1s')))",message="must be a Go duration of at least 1s, such as 30s, 10m or 1h30m, or 0 to turn the re-check off"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// SyncState is a one-word summary of an InfrahubSync, the earlier
// operator's values.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Stale
type SyncState string

const (
	// SyncStatePending means Infrahub was not asked yet.
	SyncStatePending SyncState = "Pending"
	// SyncStateRunning means some artifacts are not applied yet.
	SyncStateRunning SyncState = "Running"
	// SyncStateSucceeded means every artifact listed is applied.
	SyncStateSucceeded SyncState = "Succeeded"
	// SyncStateFailed means the last poll failed; see the conditions.
	SyncStateFailed SyncState = "Failed"
	// SyncStateStale means the sync is suspended.
	SyncStateStale SyncState = "Stale"
)

// MaxSyncArtifacts is the most artifacts one InfrahubSync takes: its
// status lists each, and must stay well within etcd's 1.5 MiB per object.
const MaxSyncArtifacts = 500

// InfrahubSyncStatus is what Vidra last found in Infrahub and applied.
type InfrahubSyncStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SyncState summarises the conditions in one word.
	// +optional
	SyncState SyncState `json:"syncState,omitempty"`

	// LastSyncTime is when a change from Infrahub was last applied (not
	// when Infrahub was last asked: a poll that changes nothing writes
	// nothing).
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// LastHandledReconcileAt echoes the value of the requested-at
	// annotation the last poll handled, 256 bytes at most.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// ArtifactCount is the number of entries of Artifacts, for the printer
	// column.
	// +optional
	ArtifactCount int32 `json:"artifactCount,omitempty"`

	// Artifacts are the artifacts Infrahub listed, at most 500, ordered by
	// id.
	// +kubebuilder:validation:MaxItems=500
	// +listType=atomic
	// +optional
	Artifacts []SyncedArtifact `json:"artifacts,omitempty"`
}

// SyncedArtifact is one artifact Infrahub listed and what became of it.
type SyncedArtifact struct {
	// ID is the artifact's id in Infrahub.
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// Name is the artifact's name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
	// Checksum is the checksum of the content, as Infrahub gives it.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// StorageID is the object-store id of the content.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	StorageID string `json:"storageID,omitempty"`
	// Target is the id of the artifact's target node, when the query
	// selects it.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Target string `json:"target,omitempty"`
	// VidraResource is the name of the VidraResource holding the content;
	// empty while the artifact is not applied.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	VidraResource string `json:"vidraResource,omitempty"`
	// LastChanged is when the content applied last changed.
	// +optional
	LastChanged *metav1.Time `json:"lastChanged,omitempty"`
	// Problem says, in at most 256 bytes, why the artifact is not applied
	// (not Ready in Infrahub, a content type Vidra cannot apply, too
	// large); empty when it is.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Problem string `json:"problem,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// InfrahubSyncList is a list of InfrahubSyncs.
type InfrahubSyncList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the InfrahubSyncs.
	Items []InfrahubSync `json:"items"`
}
