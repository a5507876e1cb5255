// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

func TestArtifactIDsQueryGivesChecksumsButNoStorageID(t *testing.T) {
	s := startStandin(t, standin.Options{})
	arts, err := newClient(t, s, login).Artifacts(ctx(t), byName)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.GetArtifact("", "a0000000-0000-0000-0000-000000000001")
	second, _ := s.GetArtifact("", "a0000000-0000-0000-0000-000000000002")
	// storage_id { id } is the attribute's id: it says nothing of the
	// content, and is not taken for the storage id. status is not selected:
	// Ready.
	want := []infrahub.Artifact{
		{ID: first.ID, Name: "app", Checksum: first.Checksum},
		{ID: second.ID, Name: "app", Checksum: second.Checksum},
	}
	if d := cmp.Diff(want, arts); d != "" {
		t.Errorf("artifacts (-want +got):\n%s", d)
	}
	for _, a := range arts {
		if !a.Ready() {
			t.Errorf("%s not Ready without a status", a.ID)
		}
	}
	if got := s.Counts(); got.Query != 1 || got.GraphQL != 0 || got.GroupUpdates != 0 {
		t.Errorf("counts %+v: want one stored query with update_group=false", got)
	}
}

func TestVidrasQuerySelectsStatusStorageIDAndTarget(t *testing.T) {
	s := startStandin(t, standin.Options{})
	pending := s.SetArtifact("", standin.Artifact{ID: "a0000000-0000-0000-0000-000000000003", Name: "app", Status: "Pending", Target: "t-3", Content: []byte("x")})
	arts, err := newClient(t, s, login).Artifacts(ctx(t), infrahub.Source{ArtifactName: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 3 {
		t.Fatalf("got %d artifacts, want 3", len(arts))
	}
	want := infrahub.Artifact{ID: pending.ID, Name: "app", Checksum: pending.Checksum, StorageID: pending.StorageID,
		Target: "t-3", ContentType: "application/yaml", Status: "Pending"}
	if d := cmp.Diff(want, arts[2]); d != "" {
		t.Errorf("artifact (-want +got):\n%s", d)
	}
	if arts[2].Ready() || !arts[0].Ready() {
		t.Errorf("Ready: pending %v, first %v", arts[2].Ready(), arts[0].Ready())
	}
	if got := s.Counts(); got.GraphQL != 1 || got.Query != 0 {
		t.Errorf("counts %+v: want one GraphQL request", got)
	}
}

func TestChangedArtifactGetsNewChecksumAndStorageID(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, login)
	src := infrahub.Source{ArtifactName: "app"}
	before, err := c.Artifacts(ctx(t), src)
	if err != nil {
		t.Fatal(err)
	}
	s.SetArtifact("", standin.Artifact{ID: before[0].ID, Name: "app", Content: []byte("kind: ConfigMap\n")}) // same content
	s.SetArtifact("", standin.Artifact{ID: before[1].ID, Name: "app", ContentType: "application/json", Content: []byte(`{"kind":"Other"}`)})
	after, err := c.Artifacts(ctx(t), src)
	if err != nil {
		t.Fatal(err)
	}
	if after[0] != before[0] {
		t.Errorf("unchanged content changed the artifact: %+v -> %+v", before[0], after[0])
	}
	if after[1].ID != before[1].ID || after[1].Checksum == before[1].Checksum || after[1].StorageID == before[1].StorageID {
		t.Errorf("changed content: %+v -> %+v, want the same id, a new checksum and storage id", before[1], after[1])
	}
}

func TestUnknownStoredQueryFallsBackToGraphQLAndIsRemembered(t *testing.T) {
	s := startStandin(t, standin.Options{})
	s.DeleteStoredQuery("ArtifactIDs")
	clock := clocktesting.NewFakePassiveClock(time.Now())
	c := newClient(t, s, login, func(o *infrahub.Options) { o.Clock = clock })
	for range 3 {
		arts, err := c.Artifacts(ctx(t), byName)
		if err != nil || len(arts) != 2 {
			t.Fatalf("Artifacts = %v, %v; want the 2 artifacts from Vidra's own query", arts, err)
		}
	}
	if got := s.Counts(); got.Query != 1 || got.GraphQL != 3 {
		t.Errorf("counts %+v: want the 404 paid once, then GraphQL only", got)
	}
	if !c.StoredQueryMissing("ArtifactIDs") || c.StoredQueryMissing("Other") {
		t.Error("StoredQueryMissing does not say which query Infrahub did not know")
	}
	// A person creates the query: it is asked for again within the hour.
	s.AddStoredQuery("ArtifactIDs", standin.ArtifactIDsQuery)
	clock.SetTime(clock.Now().Add(time.Hour))
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	if got := s.Counts(); got.Query != 2 || got.GraphQL != 3 {
		t.Errorf("counts %+v: want the stored query asked again after an hour", got)
	}
}

func TestPagedAnswersAreReadToTheEnd(t *testing.T) {
	s := startStandin(t, standin.Options{MaxPageSize: 2})
	for i := 3; i <= 5; i++ {
		s.SetArtifact("", standin.Artifact{ID: fmt.Sprintf("a0000000-0000-0000-0000-00000000000%d", i), Name: "app", Content: []byte{byte(i)}})
	}
	arts, err := newClient(t, s, login).Artifacts(ctx(t), infrahub.Source{ArtifactName: "app"})
	if err != nil || len(arts) != 5 {
		t.Fatalf("Artifacts = %d artifacts, %v; want 5", len(arts), err)
	}
	if got := s.Counts(); got.GraphQL != 3 {
		t.Errorf("counts %+v: want 3 pages", got)
	}
}

func TestByDefinitionName(t *testing.T) {
	s := startStandin(t, standin.Options{})
	s.SetArtifact("", standin.Artifact{ID: "b0000000-0000-0000-0000-000000000001", Name: "other", Definition: "other-def", Content: []byte("y")})
	arts, err := newClient(t, s, login).Artifacts(ctx(t), infrahub.Source{DefinitionName: "other-def", QueryName: "ArtifactIDs"})
	if err != nil || len(arts) != 1 || arts[0].ID != "b0000000-0000-0000-0000-000000000001" {
		t.Fatalf("Artifacts = %v, %v; want the one artifact of other-def", arts, err)
	}
}

// TestHostileAnswersAreRefused serves answers no Infrahub gives.
func TestHostileAnswersAreRefused(t *testing.T) {
	node := func(id string) string {
		return `{"node":{"id":"` + id + `","name":{"value":"app"},"checksum":{"value":"c"}}}`
	}
	long := make([]byte, 2000)
	for i := range long {
		long[i] = 'x'
	}
	for _, tt := range []struct {
		name, body string
		kind       infrahub.Kind
	}{
		{"not JSON", `<html>hello</html>`, infrahub.KindBadAnswer},
		{"no CoreArtifact", `{"data":{}}`, infrahub.KindBadAnswer},
		{"an id that is a path", `{"data":{"CoreArtifact":{"edges":[` + node("../../x") + `]}}}`, infrahub.KindBadAnswer},
		{"an id twice", `{"data":{"CoreArtifact":{"edges":[` + node("a") + `,` + node("a") + `]}}}`, infrahub.KindBadAnswer},
		{"a checksum over its bound", `{"data":{"CoreArtifact":{"edges":[{"node":{"id":"a","checksum":{"value":"` + string(long) + `"}}}]}}}`, infrahub.KindBadAnswer},
		{"a value that is not text", `{"data":{"CoreArtifact":{"edges":[{"node":{"id":"a","checksum":{"value":{"x":1}}}}]}}}`, infrahub.KindBadAnswer},
		{"a count that never ends", `{"data":{"CoreArtifact":{"count":1000,"edges":[]}}}`, infrahub.KindBadAnswer},
		{"errors with data", `{"data":{"CoreArtifact":{"edges":[]}},"errors":[{"message":"` + foreignText + `"}]}`, infrahub.KindQueryError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, err := infrahub.New(srv.URL, infrahub.Options{HTTPClient: httpClient(t), AllowHTTP: true, Credentials: infrahub.Credentials{Token: apiToken}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Artifacts(ctx(t), infrahub.Source{ArtifactName: "app"})
			if e := asError(t, err); e.Kind != tt.kind {
				t.Errorf("error %+v, want %s", e, tt.kind)
			}
			if msg := err.Error(); len(msg) > 1000 || contains(msg, "FOREIGN", "html", "../") {
				t.Errorf("Error() quotes the server: %q", msg)
			}
		})
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
