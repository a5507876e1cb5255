// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import "time"

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

// AddUser adds (or changes the password of) an account that logs in.
func (s *Server) AddUser(username, password string) {}

// AddToken adds an API token, sent as X-INFRAHUB-KEY.
func (s *Server) AddToken(token string) {}

// AddBranch creates a branch with no artifacts (SetArtifact creates its
// branch too).
func (s *Server) AddBranch(name string) {}

// SetArtifact stores a on branch ("" means the default branch), creating
// the branch if needed, and returns it as stored. Changed content gets a
// new checksum and storage id; the same content changes nothing.
func (s *Server) SetArtifact(branch string, a Artifact) Stored { return Stored{} }

// GetArtifact returns artifact id of branch as stored.
func (s *Server) GetArtifact(branch, id string) (Stored, bool) { return Stored{}, false }

// DeleteArtifact removes artifact id from branch, and reports whether it
// was there.
func (s *Server) DeleteArtifact(branch, id string) bool { return false }

// AddStoredQuery stores a GraphQL query under name, for
// /api/query/{name}. The stand-in answers queries of CoreArtifact only.
func (s *Server) AddStoredQuery(name, query string) {}

// DeleteStoredQuery removes the stored query name (ArtifactIDs included).
func (s *Server) DeleteStoredQuery(name string) {}

// RotateSecret changes the signing key: every token issued before is
// refused with 401 "Invalid token", as after a restart of Infrahub without
// a fixed secret key.
func (s *Server) RotateSecret() {}

// SetAccessLifetime changes the life of the access tokens issued from now on.
func (s *Server) SetAccessLifetime(d time.Duration) {}
