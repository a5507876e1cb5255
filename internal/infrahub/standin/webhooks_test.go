// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
)

// The stand-in's deliveries, in each of Infrahub's signing forms, verify
// with Vidra's receiver; a duplicate is a replay; a dropped one never
// comes; a refused one is retried.
func TestWebhooksAreSignedAsInfrahubSignsThem(t *testing.T) {
	for _, signing := range []Signing{SigningCompact, SigningSpaced, SigningSpacedSentCompact} {
		t.Run(signing.String(), func(t *testing.T) {
			reg := webhook.NewRegistry()
			key := cache.ObjectName{Namespace: "ns", Name: "s"}
			reg.Set(key, &webhook.Entry{UID: "u", Key: []byte("shared"), Target: webhook.Target{Branch: "main", Applied: map[string]string{}}})
			var mu sync.Mutex
			var woken []webhook.Wake
			rcv := webhook.NewReceiver(webhook.Options{Registry: reg, Wake: func(_ cache.ObjectName, w webhook.Wake) {
				mu.Lock()
				defer mu.Unlock()
				woken = append(woken, w)
			}})
			hs := httptest.NewServer(rcv)
			defer hs.Close()
			s := New(Options{})
			defer s.Close()
			s.AddWebhook(Webhook{URL: hs.URL + "/hooks/infrahub/ns/s", SharedKey: "shared", Signing: signing, Retries: 1, RetryDelay: 10 * time.Millisecond})

			s.SetArtifact("main", Artifact{ID: "a1", Name: "n", Content: []byte("x: 1\n")})
			s.DuplicateWebhooks(1)
			s.SetArtifact("main", Artifact{ID: "a2", Name: "n", Content: []byte("x: 2\n")})
			s.DropWebhooks(1)
			s.SetArtifact("main", Artifact{ID: "a3", Name: "n", Content: []byte("x: 3\n")})
			// The duplicate's second copy is a replay: refused, retried
			// once, refused again, given up.
			err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				d := s.Deliveries()
				return d.Delivered == 2 && d.Failed == 1, nil
			})
			d := s.Deliveries()
			if err != nil || d.Attempts != 4 || d.Dropped != 1 {
				t.Fatalf("deliveries %+v: want 2 delivered, 1 given up after 2 attempts, 1 dropped", d)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(woken) != 2 {
				t.Errorf("woken %d times, want 2 (a1, a2): %+v", len(woken), woken)
			}
		})
	}
}
