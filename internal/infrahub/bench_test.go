// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

// BenchmarkPollOf100Artifacts is the cost of one poll that finds nothing
// changed: one query answering 100 artifacts, with Vidra's own query and
// with the stored ArtifactIDs.
func BenchmarkPollOf100Artifacts(b *testing.B) {
	s := standin.New(standin.Options{})
	s.AddUser(user, password)
	for i := range 100 {
		s.SetArtifact("", standin.Artifact{ID: fmt.Sprintf("a0000000-0000-0000-0000-%012d", i), Name: "app", Content: []byte(fmt.Sprintf("n: %d\n", i))})
	}
	s.Start()
	defer s.Close()
	hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: allowHTTP})
	if err != nil {
		b.Fatal(err)
	}
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: hc, AllowHTTP: true, Credentials: login})
	if err != nil {
		b.Fatal(err)
	}
	for _, src := range []infrahub.Source{{ArtifactName: "app"}, {ArtifactName: "app", QueryName: "ArtifactIDs"}} {
		name := "graphql"
		if src.QueryName != "" {
			name = "stored"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				arts, err := c.Artifacts(context.Background(), src)
				if err != nil || len(arts) != 100 {
					b.Fatal(len(arts), err)
				}
			}
		})
	}
	if got := s.Counts(); got.Login != 1 {
		b.Errorf("counts %+v: want one login", got)
	}
}
