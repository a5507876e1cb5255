// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"maps"
	"slices"
)

// Artifact is an artifact to store with SetArtifact.
type Artifact struct {
	// ID is the artifact's id; "" makes one (SetArtifact returns it).
	ID string
	// Name is its name (the definition's artifact_name).
	Name string
	// Definition is its definition's name; "" means Name.
	Definition string
	// Target is its target node's id; "" makes one from the id.
	Target string
	// ContentType is its content type ("" means application/yaml).
	ContentType string
	// Status is Ready, Pending, Processing or Error ("" means Ready).
	Status string
	// Content is the rendered content.
	Content []byte
}

// Stored is an artifact as the stand-in holds it.
type Stored struct {
	Artifact
	// Checksum is the md5 of Content, lower-case hex; StorageID the id of
	// this content, new on each change.
	Checksum, StorageID string
	// DefinitionID is the id of its definition.
	DefinitionID string
}

// branch returns the artifacts of branch name ("" the default branch),
// nil if there is no such branch. s.mu is held.
func (s *Server) branch(name string) map[string]*Stored {
	if name == "" {
		name = s.opts.DefaultBranch
	}
	return s.branches[name]
}

// AddBranch creates a branch with no artifacts (SetArtifact creates its
// branch too).
func (s *Server) AddBranch(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.branches[name] == nil {
		s.branches[name] = map[string]*Stored{}
	}
}

// SetArtifact stores a on branch ("" means the default branch), creating
// the branch if needed, and returns it as stored. Changed content gets a
// new checksum and storage id; the same content changes nothing.
func (s *Server) SetArtifact(branch string, a Artifact) Stored {
	if branch == "" {
		branch = s.opts.DefaultBranch
	}
	if a.ID == "" {
		a.ID = newID()
	}
	if a.Definition == "" {
		a.Definition = a.Name
	}
	if a.Target == "" {
		a.Target = attributeID(a.ID, "target")
	}
	if a.ContentType == "" {
		a.ContentType = "application/yaml"
	}
	if a.Status == "" {
		a.Status = "Ready"
	}
	a.Content = bytes.Clone(a.Content)
	sum := md5.Sum(a.Content)

	s.mu.Lock()
	arts := s.branches[branch]
	if arts == nil {
		arts = map[string]*Stored{}
		s.branches[branch] = arts
	}
	defID, ok := s.definitions[a.Definition]
	if !ok {
		defID = newID()
		s.definitions[a.Definition] = defID
	}
	prev := arts[a.ID]
	st := &Stored{Artifact: a, Checksum: hex.EncodeToString(sum[:]), DefinitionID: defID}
	change := Change{Event: "infrahub.artifact.created", Branch: branch, ID: a.ID, Target: a.Target, DefinitionID: defID, Checksum: st.Checksum, OccurredAt: s.now()}
	switch {
	case prev == nil:
		st.StorageID = newID()
	case prev.Checksum == st.Checksum:
		// An unchanged render changes neither checksum nor storage id.
		st.StorageID = prev.StorageID
		change.Event = ""
	default:
		st.StorageID = newID()
		change.Event = "infrahub.artifact.updated"
		change.ChecksumPrevious, change.StorageIDPrevious = prev.Checksum, prev.StorageID
	}
	change.StorageID = st.StorageID
	s.objects[st.StorageID] = a.Content
	arts[a.ID] = st
	out := *st
	s.mu.Unlock()

	if change.Event != "" && s.opts.OnArtifactChange != nil {
		s.opts.OnArtifactChange(change)
	}
	if change.Event != "" {
		s.notify(change)
	}
	return out
}

// GetArtifact returns artifact id of branch as stored.
func (s *Server) GetArtifact(branch, id string) (Stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.branch(branch)[id]
	if !ok {
		return Stored{}, false
	}
	return *st, true
}

// DeleteArtifact removes artifact id from branch, and reports whether it
// was there. Infrahub sends no event for it.
func (s *Server) DeleteArtifact(branch, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	arts := s.branch(branch)
	if _, ok := arts[id]; !ok {
		return false
	}
	delete(arts, id)
	return true
}

// sorted returns the artifacts of a branch sorted by id. s.mu is held.
func sorted(arts map[string]*Stored) []*Stored {
	out := make([]*Stored, 0, len(arts))
	for _, id := range slices.Sorted(maps.Keys(arts)) {
		st := *arts[id]
		out = append(out, &st)
	}
	return out
}

// AddStoredQuery stores a GraphQL query under name, for
// /api/query/{name}. The stand-in answers queries of CoreArtifact only.
func (s *Server) AddStoredQuery(name, query string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[name] = query
}

// DeleteStoredQuery removes the stored query name (ArtifactIDs included).
func (s *Server) DeleteStoredQuery(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queries, name)
}
