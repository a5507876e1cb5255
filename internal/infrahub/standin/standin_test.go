// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

// call sends one raw request and returns the status, the decoded JSON body
// (nil if not JSON) and the headers.
func call(t *testing.T, method, url, bearer string, body any, header ...string) (int, any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v any
	if json.Unmarshal(raw, &v) != nil {
		v = nil
	}
	return resp.StatusCode, v, resp.Header
}

func envelope(status int, msg string) any {
	return map[string]any{"data": nil, "errors": []any{map[string]any{"message": msg, "extensions": map[string]any{"code": float64(status)}}}}
}

func start(t *testing.T, opts standin.Options) *standin.Server {
	t.Helper()
	s := standin.New(opts)
	s.AddUser("admin", "infrahub")
	s.AddToken("key")
	s.SetArtifact("", standin.Artifact{ID: "a1", Name: "app", Target: "t1", Content: []byte("x: 1\n")})
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func loginTokens(t *testing.T, s *standin.Server) (string, string) {
	t.Helper()
	code, v, _ := call(t, "POST", s.URL()+"/api/auth/login", "", map[string]string{"username": "admin", "password": "infrahub"})
	if code != 200 {
		t.Fatalf("login: %d %v", code, v)
	}
	m := v.(map[string]any)
	return m["access_token"].(string), m["refresh_token"].(string)
}

func TestAuthAnswersAsInfrahub(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s := start(t, standin.Options{Clock: clock, AccessLifetime: time.Minute})
	q := s.URL() + "/api/query/ArtifactIDs"
	vars := map[string]any{"variables": map[string]string{"artifactname": "app"}}

	code, v, _ := call(t, "POST", s.URL()+"/api/auth/login", "", map[string]string{"username": "nobody", "password": "x"})
	if code != 404 {
		t.Errorf("unknown user: %d %v, want 404", code, v)
	}
	if code, v, _ = call(t, "POST", s.URL()+"/api/auth/login", "", map[string]string{"username": "admin", "password": "x"}); code != 401 {
		t.Errorf("bad password: %d %v, want 401", code, v)
	}
	if code, v, _ = call(t, "POST", s.URL()+"/api/auth/login", "", map[string]string{"username": "admin"}); code != 422 || v.(map[string]any)["detail"] == nil {
		t.Errorf("no password: %d %v, want 422 with FastAPI's detail", code, v)
	}
	if code, v, _ = call(t, "POST", q, "", vars); code != 403 || !cmp.Equal(v, envelope(403, "You are not allowed to perform this operation")) {
		t.Errorf("anonymous POST: %d %v, want 403 and the envelope", code, v)
	}
	if code, _, _ = call(t, "GET", s.URL()+"/api/artifact/a1", "", nil); code != 200 {
		t.Errorf("anonymous GET: %d, want 200", code)
	}
	if code, _, _ = call(t, "POST", q, "", vars, "X-INFRAHUB-KEY", "key"); code != 200 {
		t.Errorf("API token: %d, want 200", code)
	}

	access, refresh := loginTokens(t, s)
	if code, _, _ = call(t, "POST", q, access, vars); code != 200 {
		t.Errorf("access token: %d, want 200", code)
	}
	clock.SetTime(clock.Now().Add(2 * time.Minute))
	if code, v, _ = call(t, "POST", q, access, vars); code != 401 || !cmp.Equal(v, envelope(401, "Expired Signature")) {
		t.Errorf("expired: %d %v, want 401 Expired Signature", code, v)
	}
	code, v, _ = call(t, "POST", s.URL()+"/api/auth/refresh", refresh, nil)
	if code != 200 {
		t.Fatalf("refresh: %d %v", code, v)
	}
	if code, _, _ = call(t, "POST", q, v.(map[string]any)["access_token"].(string), vars); code != 200 {
		t.Errorf("refreshed token: %d, want 200", code)
	}
	if code, _, _ = call(t, "POST", s.URL()+"/api/auth/refresh", access, nil); code != 401 {
		t.Errorf("refresh with an access token: %d, want 401", code)
	}
	s.RotateSecret()
	if code, v, _ = call(t, "POST", s.URL()+"/api/auth/refresh", refresh, nil); code != 401 || !cmp.Equal(v, envelope(401, "Invalid token")) {
		t.Errorf("refresh after rotation: %d %v, want 401 Invalid token", code, v)
	}
	if got := s.Counts(); got.Login != 4 || got.Refresh != 3 || got.Query != 5 || got.Download != 1 {
		t.Errorf("counts %+v", got)
	}
}

func TestQueriesAnswerExactlyTheSelection(t *testing.T) {
	s := start(t, standin.Options{})
	st, _ := s.GetArtifact("", "a1")
	access, _ := loginTokens(t, s)

	code, v, _ := call(t, "POST", s.URL()+"/api/query/ArtifactIDs?branch=main&update_group=false", access,
		map[string]any{"variables": map[string]string{"artifactname": "app"}})
	attrID := v.(map[string]any)["data"].(map[string]any)["CoreArtifact"].(map[string]any)["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)["storage_id"].(map[string]any)["id"]
	want := map[string]any{"data": map[string]any{"CoreArtifact": map[string]any{"edges": []any{map[string]any{"node": map[string]any{
		"id": "a1", "storage_id": map[string]any{"id": attrID}, "checksum": map[string]any{"value": st.Checksum}, "name": map[string]any{"value": "app"},
	}}}}}}
	if code != 200 || !cmp.Equal(v, want) || attrID == st.StorageID {
		t.Errorf("ArtifactIDs: %d, diff (-want +got):\n%s", code, cmp.Diff(want, v))
	}

	code, v, _ = call(t, "POST", s.URL()+"/graphql/main", access, map[string]any{
		"query":     `query Q($n: [String]) { CoreArtifact(name__values: $n) { count edges { node { id storage_id { value } status { value } object { node { id } } } } } }`,
		"variables": map[string]any{"n": []string{"app"}},
	})
	want = map[string]any{"data": map[string]any{"CoreArtifact": map[string]any{"count": float64(1), "edges": []any{map[string]any{"node": map[string]any{
		"id": "a1", "storage_id": map[string]any{"value": st.StorageID}, "status": map[string]any{"value": "Ready"}, "object": map[string]any{"node": map[string]any{"id": "t1"}},
	}}}}}}
	if code != 200 || !cmp.Equal(v, want) {
		t.Errorf("GraphQL: %d, diff (-want +got):\n%s", code, cmp.Diff(want, v))
	}

	code, v, _ = call(t, "POST", s.URL()+"/graphql/nope", access, map[string]any{"query": "{ CoreArtifact { count } }"})
	if want := map[string]any{"errors": []any{"Branch: nope not found."}}; code != 404 || !cmp.Equal(v, want) {
		t.Errorf("GraphQL on an unknown branch: %d %v, want 404 with plain-string errors", code, v)
	}
	code, v, _ = call(t, "POST", s.URL()+"/graphql", access, map[string]any{"query": "{ CoreArtifact { edges { node { nope } } } }"})
	if m, _ := v.(map[string]any); code != 200 || m["data"] != nil || m["errors"] == nil {
		t.Errorf("GraphQL error: %d %v, want 200 with errors", code, v)
	}

	code, v, _ = call(t, "POST", s.URL()+"/api/query/ArtifactIDs?branch=nope", access, map[string]any{"variables": map[string]string{"artifactname": "app"}})
	if code != 400 || !cmp.Equal(v, envelope(400, "Branch: nope not found.")) {
		t.Errorf("stored query on an unknown branch: %d %v", code, v)
	}
	if code, _, _ = call(t, "POST", s.URL()+"/api/query/Nope", access, map[string]any{"variables": map[string]string{}}); code != 404 {
		t.Errorf("unknown stored query: %d, want 404", code)
	}
	if code, _, _ = call(t, "POST", s.URL()+"/api/query/ArtifactIDs", access, map[string]any{"variables": map[string]any{"artifactname": []string{"app"}}}); code != 422 {
		t.Errorf("a list variable: %d, want 422 (strings only)", code)
	}
	if code, _, _ = call(t, "GET", s.URL()+"/api/query/ArtifactIDs?artifactname=app&at=2d", access, nil); code != 400 {
		t.Errorf("at=2d: %d, want 400", code)
	}
	if code, _, _ = call(t, "GET", s.URL()+"/api/query/ArtifactIDs?artifactname=app&at=now%2B2h", access, nil); code != 200 {
		t.Errorf("at=now+2h: %d, want 200 (Infrahub reads it as two hours ago)", code)
	}
	s.AddStoredQuery("Broken", "query { CoreArtifact { edges { node { nope } } } }")
	code, v, _ = call(t, "POST", s.URL()+"/api/query/Broken", access, map[string]any{"variables": map[string]string{}})
	errs, _ := v.(map[string]any)["errors"].([]any)
	if code != 502 || len(errs) != 1 || !strings.HasPrefix(errs[0].(map[string]any)["message"].(string), "GraphQLQuery Broken: ") {
		t.Errorf("failed stored query: %d %v, want 502 with GraphQLQuery Broken: ...", code, v)
	}
}

func TestArtifactsAreVersioned(t *testing.T) {
	var changes []standin.Change
	s := standin.New(standin.Options{OnArtifactChange: func(c standin.Change) { changes = append(changes, c) }})
	first := s.SetArtifact("", standin.Artifact{ID: "a1", Name: "app", Content: []byte("v1")})
	same := s.SetArtifact("", standin.Artifact{ID: "a1", Name: "app", Content: []byte("v1")})
	second := s.SetArtifact("", standin.Artifact{ID: "a1", Name: "app", Content: []byte("v2")})
	if first.Checksum != "6654c734ccab8f440ff0825eb443dc7f" || same.StorageID != first.StorageID || second.StorageID == first.StorageID || second.Checksum == first.Checksum {
		t.Errorf("versions: %+v, %+v, %+v", first, same, second)
	}
	if len(changes) != 2 || changes[0].Event != "infrahub.artifact.created" || changes[1].Event != "infrahub.artifact.updated" ||
		changes[1].ChecksumPrevious != first.Checksum || changes[1].StorageIDPrevious != first.StorageID {
		t.Errorf("changes: %+v, want created then updated with the previous checksum and storage id", changes)
	}
	if !s.DeleteArtifact("", "a1") || s.DeleteArtifact("", "a1") {
		t.Error("DeleteArtifact")
	}
}

func TestFaultsApplyToTheNextAnswers(t *testing.T) {
	s := start(t, standin.Options{})
	s.Fault(standin.Fault{Endpoint: standin.EndpointDownload, Status: 429, RetryAfter: 3 * time.Second, Times: 2})
	for i := range 3 {
		code, v, h := call(t, "GET", s.URL()+"/api/artifact/a1", "", nil)
		switch {
		case i < 2 && (code != 429 || h.Get("Retry-After") != "3" || !cmp.Equal(v, envelope(429, "Too many requests, the server is overloaded. Please retry later."))):
			t.Errorf("answer %d: %d %v Retry-After %q, want 429 with Retry-After 3", i, code, v, h.Get("Retry-After"))
		case i == 2 && code != 200:
			t.Errorf("answer %d: %d, want 200 after the fault", i, code)
		}
	}
}
