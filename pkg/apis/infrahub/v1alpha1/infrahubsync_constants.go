// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// Marks an InfrahubSync puts on the VidraResources it generates.
const (
	// SyncNameLabel names, on a generated VidraResource, the InfrahubSync
	// of its namespace that generated it. Ownership is decided by the
	// controller ownerReference's UID, never by this label alone.
	SyncNameLabel = "infrahubsync.infrahub.operators.com/name"
	// ArtifactChecksumAnnotation carries, on a generated VidraResource, the
	// checksum Infrahub gave for the content its manifest holds: the next
	// poll downloads the artifact only when Infrahub lists another.
	ArtifactChecksumAnnotation = "infrahubsync.infrahub.operators.com/checksum"
	// ArtifactStorageIDAnnotation carries the storage id of that content.
	ArtifactStorageIDAnnotation = "infrahubsync.infrahub.operators.com/storage-id"
	// ArtifactContentSHA256Annotation carries the SHA-256 of the manifest
	// the sync wrote: the operator's cache of VidraResources holds that sum,
	// not the manifest, so a hand edit of the manifest is told by it.
	ArtifactContentSHA256Annotation = "infrahubsync.infrahub.operators.com/content-sha256"
	// ArtifactNameAnnotation carries the artifact's name in Infrahub.
	ArtifactNameAnnotation = "infrahubsync.infrahub.operators.com/artifact-name"
	// InfrahubSyncFieldManager is the field manager of the writes of the
	// InfrahubSync controller: generated VidraResources and sync status.
	InfrahubSyncFieldManager = "vidra-infrahubsync"
	// InfrahubSyncResourcePlural is the resource name of InfrahubSyncs in
	// API paths.
	InfrahubSyncResourcePlural = "infrahubsyncs"
)

// Condition reasons of InfrahubSync status. Ready, Reconciling and Stalled
// are the condition types of VidraResources.
const (
	// ReasonSynced: every artifact listed is applied.
	ReasonSynced = "Synced"
	// ReasonInfrahubUnavailable: Infrahub could not be asked or refused
	// the request; nothing applied was removed.
	ReasonInfrahubUnavailable = "InfrahubUnavailable"
	// ReasonCredentialsUnavailable: the credentials or CA Secret could not
	// be read (missing, malformed, or not readable by the ServiceAccount).
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	// ReasonWebhookUnavailable (an Event): the webhook Secret could not
	// be read or holds no sharedKey; webhooks are refused, the poll goes
	// on.
	ReasonWebhookUnavailable = "WebhookUnavailable"
	// ReasonInvalidSource: spec.source cannot be used as it is (a plain
	// http:// URL the operator does not allow, a bad targetDate).
	ReasonInvalidSource = "InvalidSource"
	// ReasonArtifactsNotApplied: some artifacts listed are not applied
	// (not Ready in Infrahub, a content type Vidra cannot apply, too
	// large); status.artifacts says why for each.
	ReasonArtifactsNotApplied = "ArtifactsNotApplied"
	// ReasonTooManyArtifacts: Infrahub listed more artifacts than one sync
	// takes (MaxSyncArtifacts); nothing was changed.
	ReasonTooManyArtifacts = "TooManyArtifacts"
	// ReasonNameTaken: a VidraResource named after an artifact exists and
	// is not this sync's; it is left alone.
	ReasonNameTaken = "NameTaken"
)
