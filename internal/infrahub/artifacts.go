// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// Artifact is one CoreArtifact as a query answered it.
type Artifact struct {
	// ID is the artifact's id, stable across content changes.
	ID string
	// Name is the artifact's name (its definition's artifact_name).
	Name string
	// Checksum is the md5 of the content, exactly as Infrahub gave it.
	Checksum string
	// StorageID is the object-store id of the current content, new on each
	// change; "" when the query selects storage_id { id } (the attribute's
	// id, as the earlier ArtifactIDs query does, which says nothing about
	// the content) or does not select it.
	StorageID string
	// Target is the id of the artifact's target node; "" when the query
	// does not select it.
	Target string
	// ContentType is the artifact's content_type (application/yaml, ...);
	// "" when the query does not select it.
	ContentType string
	// Status is Error, Pending, Processing or Ready; "" when the query does
	// not select it, which means Ready (see Ready).
	Status string
}

// Ready reports whether the artifact's content may be applied: its status
// is Ready, or the query did not select it.
func (a Artifact) Ready() bool { return a.Status == "" || a.Status == StatusReady }

// ChangedSince reports whether the artifact's content may differ from the
// content last applied, known by its checksum and storage id (as an earlier
// Artifact gave them): a different checksum, or, when both storage ids are
// known, a different storage id (each change of content gets a new one).
// An empty checksum on either side says nothing is known: changed. A caller
// downloads only the artifacts that changed.
func (a Artifact) ChangedSince(checksum, storageID string) bool {
	switch {
	case a.Checksum == "" || checksum == "":
		return true
	case a.Checksum != checksum:
		return true
	}
	return a.StorageID != "" && storageID != "" && a.StorageID != storageID
}

// The artifact statuses of Infrahub.
const (
	StatusReady      = "Ready"
	StatusPending    = "Pending"
	StatusProcessing = "Processing"
	StatusError      = "Error"
)

// Artifacts returns the artifacts src selects, in one request when nothing
// fails: the stored query src.QueryName with the string variable
// artifactname (POST /api/query/{name}?branch=&at=&update_group=false), or
// Vidra's own GraphQL query (POST /graphql/{branch}?at=). A 401 costs at
// most one refresh or login and one more request; a stored query Infrahub
// does not know costs one more request the first time. The answer is
// bounded by Options.MaxResponseBytes; every error is an *Error.
func (c *Client) Artifacts(ctx context.Context, src Source) ([]Artifact, error) {
	if err := c.checkSource(OpGraphQL, src); err != nil {
		return nil, err
	}
	if src.QueryName != "" && src.ArtifactName != "" && !c.storedQueryMissing(src.QueryName) {
		arts, err := c.storedQuery(ctx, src)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindNotFound {
			return arts, err
		}
		c.mu.Lock()
		c.missing[src.QueryName] = c.clock.Now()
		c.mu.Unlock()
		klog.FromContext(ctx).Info("Infrahub has no stored query of that name; asking Vidra's own query instead",
			"host", c.host, "query", src.QueryName, "recheckAfter", storedQueryRecheck)
	}
	return c.graphQL(ctx, src)
}

// storedQueryMissing reports whether Infrahub answered 404 for the stored
// query name less than storedQueryRecheck ago.
func (c *Client) storedQueryMissing(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.missing[name]
	if ok && c.clock.Since(at) >= storedQueryRecheck {
		delete(c.missing, name)
		return false
	}
	return ok
}

// StoredQueryMissing reports whether Infrahub answered 404 for the stored
// query name within the last hour, so that Artifacts asks Vidra's own
// query instead: a caller may say so in a status (the sync's queryName
// names nothing Infrahub knows).
func (c *Client) StoredQueryMissing(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.missing[name]
	return ok && c.clock.Since(at) < storedQueryRecheck
}

// checkSource refuses a Source Vidra does not send.
func (c *Client) checkSource(op string, src Source) error {
	invalid := func(detail string) error { return &Error{Op: op, Host: c.host, Kind: KindInvalid, detail: detail} }
	if err := ValidateBranch(src.Branch); err != nil {
		return invalid("spec.source.targetBranch: " + err.Error())
	}
	if err := ValidateAt(src.At); err != nil {
		return invalid("spec.source.targetDate: " + err.Error())
	}
	if op == OpDownload {
		return nil
	}
	if err := validQueryName(src.QueryName); err != nil {
		return invalid("spec.queryName: " + err.Error())
	}
	switch {
	case src.ArtifactName == "" && src.DefinitionName == "":
		return invalid("no artifact name (spec.source.artefactName) to ask for")
	case len(src.ArtifactName) > maxFieldBytes || len(src.DefinitionName) > maxFieldBytes:
		return invalid(fmt.Sprintf("an artifact or definition name has at most %d bytes", maxFieldBytes))
	}
	return nil
}

// sourceQuery returns the branch= and at= of src.
func sourceQuery(src Source) url.Values {
	q := url.Values{}
	if src.Branch != "" {
		q.Set("branch", src.Branch)
	}
	if src.At != "" {
		q.Set("at", src.At)
	}
	return q
}

// storedQuery runs the stored query src.QueryName with artifactname.
// Infrahub takes string variables only (a [String] variable is made of
// one); update_group=false keeps the read a read (true makes Infrahub write
// a group of the nodes it returned).
func (c *Client) storedQuery(ctx context.Context, src Source) ([]Artifact, error) {
	q := sourceQuery(src)
	q.Set("update_group", "false")
	a, err := c.do(ctx, request{
		op: OpQuery, method: http.MethodPost, path: "/api/query/" + url.PathEscape(src.QueryName), query: q,
		body:  map[string]map[string]string{"variables": {"artifactname": src.ArtifactName}},
		limit: c.maxResponse,
	})
	if err != nil {
		return nil, err
	}
	page, err := c.parseArtifacts(OpQuery, a)
	if err != nil {
		return nil, err
	}
	return page.artifacts, checkUnique(c, OpQuery, page.artifacts)
}

// Vidra's own queries, by artifact name and by definition name. They
// select status (an artifact not Ready is not applied), storage_id's value
// (the object-store id, new on each change) and the target's id, and count
// the matches so that a server that pages its answers is read to the end.
const (
	queryByName = `query VidraArtifacts($name: [String], $offset: Int) {
  CoreArtifact(name__values: $name, offset: $offset) {
    count
    edges { node { id name { value } checksum { value } storage_id { value } content_type { value } status { value } object { node { id } } } }
  }
}`
	queryByDefinition = `query VidraArtifacts($name: String, $offset: Int) {
  CoreArtifact(definition__name__value: $name, offset: $offset) {
    count
    edges { node { id name { value } checksum { value } storage_id { value } content_type { value } status { value } object { node { id } } } }
  }
}`
)

// maxPages bounds the pages of one answer: Infrahub answers in one page
// unless a limit is set, and a server counting more than it ever sends
// must not keep Vidra asking.
const maxPages = 100

// graphQL runs Vidra's own query on /graphql/{branch}, reading every page.
// The pages together are bounded by Options.MaxResponseBytes.
func (c *Client) graphQL(ctx context.Context, src Source) ([]Artifact, error) {
	path := "/graphql"
	if src.Branch != "" {
		// ValidateBranch allows only characters a path carries as they
		// are; "/" in a branch name is Infrahub's path parameter too.
		path += "/" + src.Branch
	}
	query, name := queryByName, any([]string{src.ArtifactName})
	if src.DefinitionName != "" {
		query, name = queryByDefinition, src.DefinitionName
	}
	var all []Artifact
	left := c.maxResponse
	for pages := 0; ; pages++ {
		a, err := c.do(ctx, request{
			op: OpGraphQL, method: http.MethodPost, path: path, query: sourceQuery(src),
			body: map[string]any{"query": query, "operationName": "VidraArtifacts",
				"variables": map[string]any{"name": name, "offset": len(all)}},
			limit: left,
		})
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == KindTooLarge {
				e.Limit = c.maxResponse
			}
			return nil, err
		}
		left -= int64(len(a.body))
		page, err := c.parseArtifacts(OpGraphQL, a)
		if err != nil {
			return nil, err
		}
		all = append(all, page.artifacts...)
		if page.count < 0 || int64(len(all)) >= page.count {
			break
		}
		if len(page.artifacts) == 0 || pages+1 >= maxPages {
			return nil, &Error{Op: OpGraphQL, Host: c.host, Kind: KindBadAnswer, Status: a.status,
				detail: "its count of artifacts promises more than its pages hold"}
		}
	}
	return all, checkUnique(c, OpGraphQL, all)
}

// maxFieldBytes bounds each field of an artifact Vidra keeps: they go into
// the sync's status.
const maxFieldBytes = 1 << 10

// page is one answer of a query: its artifacts, and the count of matches
// when the query selected it (-1 otherwise).
type page struct {
	artifacts []Artifact
	count     int64
}

// queryAnswer is a GraphQL answer of CoreArtifact, as far as Vidra reads it.
type queryAnswer struct {
	Data *struct {
		CoreArtifact *struct {
			Count *int64 `json:"count"`
			Edges []struct {
				Node *artifactNode `json:"node"`
			} `json:"edges"`
		} `json:"CoreArtifact"`
	} `json:"data"`
	Errors []json.RawMessage `json:"errors"`
}

// artifactNode is a CoreArtifact node. An attribute is an object
// ({ value } or { id }), a relation { node { id } }.
type artifactNode struct {
	ID          *string    `json:"id"`
	Name        *attribute `json:"name"`
	Checksum    *attribute `json:"checksum"`
	StorageID   *attribute `json:"storage_id"`
	ContentType *attribute `json:"content_type"`
	Status      *attribute `json:"status"`
	Object      *struct {
		Node *struct {
			ID string `json:"id"`
		} `json:"node"`
	} `json:"object"`
}

// attribute is an attribute as selected: its value, if the query selected
// it (storage_id { id } selects the attribute's own id, which says nothing
// about the content, and is not read).
type attribute struct {
	Value *json.RawMessage `json:"value"`
}

// text returns the attribute's value as a string; "" when not selected or
// null. A value that is not a string is a bad answer.
func (a *attribute) text() (string, bool) {
	if a == nil || a.Value == nil || string(*a.Value) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(*a.Value, &s) != nil {
		return "", false
	}
	return s, true
}

// parseArtifacts reads the artifacts of a query's answer.
func (c *Client) parseArtifacts(op string, a *answer) (page, error) {
	bad := func(detail string) (page, error) {
		e := &Error{Op: op, Host: c.host, Kind: KindBadAnswer, Status: a.status, detail: detail}
		e.setBody(a.body)
		return page{}, e
	}
	var ans queryAnswer
	if err := json.Unmarshal(a.body, &ans); err != nil {
		return bad("the answer is not the JSON of a GraphQL answer")
	}
	if len(ans.Errors) > 0 {
		e := &Error{Op: op, Host: c.host, Kind: KindQueryError, Status: a.status}
		e.setBody(a.body)
		return page{}, e
	}
	if ans.Data == nil || ans.Data.CoreArtifact == nil {
		return bad("the answer holds no CoreArtifact")
	}
	p := page{count: -1}
	if n := ans.Data.CoreArtifact.Count; n != nil {
		p.count = *n
	}
	p.artifacts = make([]Artifact, 0, len(ans.Data.CoreArtifact.Edges))
	for _, edge := range ans.Data.CoreArtifact.Edges {
		n := edge.Node
		if n == nil || n.ID == nil {
			return bad("an artifact without an id")
		}
		art := Artifact{ID: *n.ID}
		if errs := validation.IsDNS1123Subdomain(art.ID); len(errs) > 0 {
			return bad("an artifact id that cannot name a VidraResource")
		}
		for _, f := range []struct {
			attr *attribute
			into *string
		}{{n.Name, &art.Name}, {n.Checksum, &art.Checksum}, {n.StorageID, &art.StorageID}, {n.ContentType, &art.ContentType}, {n.Status, &art.Status}} {
			v, ok := f.attr.text()
			if !ok {
				return bad("an attribute of an artifact whose value is not text")
			}
			*f.into = v
		}
		if n.Object != nil && n.Object.Node != nil {
			art.Target = n.Object.Node.ID
		}
		for _, v := range []string{art.Name, art.Checksum, art.StorageID, art.ContentType, art.Status, art.Target} {
			if len(v) > maxFieldBytes || !utf8.ValidString(v) {
				return bad(fmt.Sprintf("a field of an artifact over %d bytes", maxFieldBytes))
			}
		}
		p.artifacts = append(p.artifacts, art)
	}
	return p, nil
}

// checkUnique refuses an answer that names an artifact twice: each becomes
// one VidraResource, named by its id.
func checkUnique(c *Client, op string, arts []Artifact) error {
	seen := make(map[string]bool, len(arts))
	for _, a := range arts {
		if seen[a.ID] {
			return &Error{Op: op, Host: c.host, Kind: KindBadAnswer, Status: http.StatusOK, detail: "it names an artifact twice"}
		}
		seen[a.ID] = true
	}
	return nil
}
