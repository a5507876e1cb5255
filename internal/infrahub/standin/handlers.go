// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// branchOf returns the branch a request names with branch= ("" the default
// branch's name).
func (s *Server) branchOf(r *http.Request) string {
	if b := r.URL.Query().Get("branch"); b != "" {
		return b
	}
	return s.opts.DefaultBranch
}

// storedQuery answers /api/query/{name}: POST with {"variables": {k:
// "<string>"}}, or GET with the variables as query parameters.
func (s *Server) storedQuery(w http.ResponseWriter, r *http.Request) {
	if !s.identify(w, r) {
		return
	}
	name := r.PathValue("name")
	vars := map[string]any{}
	if r.Method == http.MethodPost {
		var body struct {
			Variables map[string]json.RawMessage `json:"variables"`
		}
		raw, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &body); err != nil {
				writeValidation(w, nil, "JSON decode error")
				return
			}
		}
		for k, v := range body.Variables {
			var str string
			if json.Unmarshal(v, &str) != nil {
				// Infrahub's payload model takes strings only.
				writeValidation(w, []string{"variables", k}, "Input should be a valid string")
				return
			}
			vars[k] = str
		}
	} else {
		for k, v := range r.URL.Query() {
			if k != "branch" && k != "at" && k != "update_group" && len(v) > 0 {
				vars[k] = v[0]
			}
		}
	}
	branch := s.branchOf(r)
	s.mu.Lock()
	query, ok := s.queries[name]
	arts := s.branch(branch)
	var list []*Stored
	if arts != nil {
		list = sorted(arts)
	}
	s.mu.Unlock()
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "Unable to find the CoreGraphQLQuery "+name+" in the database.")
		return
	case arts == nil:
		writeError(w, http.StatusBadRequest, "Branch: "+branch+" not found.")
		return
	case !validAt(r.URL.Query().Get("at")):
		writeError(w, http.StatusBadRequest, "Invalid time format for "+r.URL.Query().Get("at"))
		return
	}
	doc, perr := parseDocument(query)
	var data map[string]any
	var errs []gqlError
	if perr != nil {
		errs = []gqlError{*perr}
	} else {
		data, errs = s.execute(doc, vars, list)
	}
	if len(errs) > 0 {
		// A failed stored query: 502, its errors prefixed with the query's
		// name, with path and locations and no extensions.
		out := make([]any, 0, len(errs))
		for _, e := range errs {
			out = append(out, map[string]any{"message": "GraphQLQuery " + name + ": " + e.Message, "path": nil, "locations": e.Locations})
		}
		writeJSON(w, http.StatusBadGateway, map[string]any{"data": nil, "errors": out})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// graphQL answers POST /graphql[/{branch}].
func (s *Server) graphQL(w http.ResponseWriter, r *http.Request) {
	if !s.identify(w, r) {
		return
	}
	if media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); media != "application/json" {
		writeError(w, http.StatusBadRequest, "Content-Type must be application/json")
		return
	}
	branch := r.PathValue("branch")
	if branch == "" {
		branch = s.opts.DefaultBranch
	}
	s.mu.Lock()
	arts := s.branch(branch)
	var list []*Stored
	if arts != nil {
		list = sorted(arts)
	}
	s.mu.Unlock()
	if arts == nil {
		// Plain strings, unlike the REST envelope.
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": []string{"Branch: " + branch + " not found."}})
		return
	}
	if !validAt(r.URL.Query().Get("at")) {
		writeError(w, http.StatusBadRequest, "Invalid time format for "+r.URL.Query().Get("at"))
		return
	}
	var body struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err := json.Unmarshal(raw, &body); err != nil || body.Query == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []any{map[string]any{"message": "Must provide query string."}}})
		return
	}
	doc, perr := parseDocument(body.Query)
	if perr != nil {
		writeJSON(w, http.StatusOK, map[string]any{"data": nil, "errors": []gqlError{*perr}})
		return
	}
	data, errs := s.execute(doc, body.Variables, list)
	if len(errs) > 0 {
		writeJSON(w, http.StatusOK, map[string]any{"data": nil, "errors": errs})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// artifact answers GET /api/artifact/{id}: the content, with its content
// type.
func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	if !s.identify(w, r) {
		return
	}
	id, branch := r.PathValue("id"), s.branchOf(r)
	s.mu.Lock()
	arts := s.branch(branch)
	var st *Stored
	if arts != nil {
		st = arts[id]
	}
	s.mu.Unlock()
	switch {
	case arts == nil:
		writeError(w, http.StatusBadRequest, "Branch: "+branch+" not found.")
	case !validAt(r.URL.Query().Get("at")):
		writeError(w, http.StatusBadRequest, "Invalid time format for "+r.URL.Query().Get("at"))
	case st == nil:
		writeError(w, http.StatusNotFound, "Unable to find the node "+id+" / CoreArtifact in the database.")
	default:
		w.Header().Set("Content-Type", st.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(st.Content)))
		_, _ = w.Write(st.Content)
	}
}

// object answers GET /api/storage/object/{storage_id}: raw bytes with no
// content type.
func (s *Server) object(w http.ResponseWriter, r *http.Request) {
	if !s.identify(w, r) {
		return
	}
	s.mu.Lock()
	content, ok := s.objects[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Unable to find the object in the storage.")
		return
	}
	// No sniffed type: Infrahub sends none.
	w.Header()["Content-Type"] = nil
	_, _ = w.Write(content)
}

// Infrahub's reading of a string it cannot parse as ISO 8601: it searches
// it for these, each anywhere, and means now minus their sum.
var relativeParts = []*regexp.Regexp{
	regexp.MustCompile(`(\d+)(s|sec|second|seconds)`),
	regexp.MustCompile(`(\d+)(m|min|minute|minutes)`),
	regexp.MustCompile(`(\d+)(h|hour|hours)`),
}

// validAt reports whether Infrahub accepts at: empty, ISO 8601 as Infrahub
// parses it, or a string in which it finds a relative part.
func validAt(at string) bool {
	if at == "" {
		return true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if _, err := time.Parse(layout, at); err == nil {
			return true
		}
	}
	for _, re := range relativeParts {
		if re.MatchString(at) {
			return true
		}
	}
	return false
}
