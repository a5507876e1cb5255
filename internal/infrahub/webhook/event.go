// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"encoding/json"
	"regexp"
)

// The artifact events Infrahub sends; there is no artifact-deleted event.
const (
	EventArtifactCreated = "infrahub.artifact.created"
	EventArtifactUpdated = "infrahub.artifact.updated"
)

// Event is the part of Infrahub's event body the receiver reads. Its
// checksum and storage id say only whether a wake-up is worth it: the
// sync downloads the content and takes its checksum from what it got.
type Event struct {
	Event string `json:"event"`
	// Branch is null for events of no branch.
	Branch *string `json:"branch"`
	// OccuredAt is Infrahub's spelling.
	OccuredAt string    `json:"occured_at"`
	Data      EventData `json:"data"`
}

// EventData is the artifact an event is about.
type EventData struct {
	NodeID               string `json:"node_id"`
	ArtifactDefinitionID string `json:"artifact_definition_id"`
	Checksum             string `json:"checksum"`
	ChecksumPrevious     string `json:"checksum_previous"`
	StorageID            string `json:"storage_id"`
}

// idPattern is what an artifact id, checksum or storage id may look like
// here: Infrahub's are UUIDs and md5 hex; anything else is not looked up.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Target is what the Registry knows of a sync to decide on an event.
type Target struct {
	// Branch is the sync's branch.
	Branch string
	// Applied maps the ids of the artifacts the sync holds to the checksum
	// it applied.
	Applied map[string]string
}

// Wake is what a relevant event asks of the sync: a pass for one
// artifact, or (Full) a whole pass with a query.
type Wake struct {
	// ArtifactID is the artifact to look at again.
	ArtifactID string
	// Checksum and StorageID are what the event said; the sync compares
	// them with what it downloads, never applies them.
	Checksum, StorageID string
	// Full asks for a whole pass: a created artifact the sync does not
	// hold may be one of its own.
	Full bool
}

// Decide tells whether a verified event wakes the sync t, and for what:
// an artifact event of the sync's branch (or of no branch) that names an
// artifact the sync holds with another checksum wakes it for that
// artifact; a created event naming one it does not hold wakes a whole
// pass. Everything else, duplicates and late deliveries of what is
// applied included, is ignored.
func Decide(t Target, body []byte) (Wake, bool) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Wake{}, false
	}
	if e.Event != EventArtifactCreated && e.Event != EventArtifactUpdated {
		return Wake{}, false
	}
	if e.Branch != nil && *e.Branch != t.Branch {
		return Wake{}, false
	}
	d := e.Data
	if !idPattern.MatchString(d.NodeID) {
		return Wake{}, false
	}
	if d.Checksum != "" && !idPattern.MatchString(d.Checksum) || d.StorageID != "" && !idPattern.MatchString(d.StorageID) {
		return Wake{}, false
	}
	applied, held := t.Applied[d.NodeID]
	switch {
	case held && d.Checksum != "" && d.Checksum == applied:
		return Wake{}, false
	case held:
		return Wake{ArtifactID: d.NodeID, Checksum: d.Checksum, StorageID: d.StorageID}, true
	case e.Event == EventArtifactCreated:
		return Wake{Full: true}, true
	}
	return Wake{}, false
}
