// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

const sharedKey = "infrahub-shared-key"

// insecureClient trusts the receiver's self-signed certificate, as an
// Infrahub webhook with validate_certificates false does.
var insecureClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the receiver's certificate is self-signed
}}

// webhookSecret creates the Secret of the shared key in ns.
func webhookSecret(t *testing.T, ns string) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "infrahub-webhook"},
		StringData: map[string]string{v1alpha1.WebhookSharedKey: sharedKey},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func hookURL(ns, name string) string {
	return "https://" + op.WebhookAddr() + webhook.PathPrefix + ns + "/" + name
}

func withWebhook(interval *metav1.Duration) func(*v1alpha1.InfrahubSync) {
	return func(s *v1alpha1.InfrahubSync) {
		s.Spec.Interval = interval
		s.Spec.Webhook = &v1alpha1.WebhookSpec{SecretRef: v1alpha1.LocalSecretReference{Name: "infrahub-webhook"}}
	}
}

func verdicts(t *testing.T) map[webhook.Verdict]float64 {
	t.Helper()
	out := map[webhook.Verdict]float64{}
	for _, v := range []webhook.Verdict{webhook.Accepted, webhook.BadSignature, webhook.Stale, webhook.Replay, webhook.Unknown, webhook.Ignored, webhook.Malformed} {
		m := &dto.Metric{}
		if err := op.Webhooks().Counter(v).Write(m); err != nil {
			t.Fatal(err)
		}
		out[v] = m.GetCounter().GetValue()
	}
	return out
}

// post sends body to the receiver with the signing headers of key (a
// request of the test's own making, not the stand-in's).
func post(t *testing.T, url, key, id string, ts time.Time, body string) int {
	t.Helper()
	tss := fmt.Sprint(ts.Unix())
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(id + "." + tss + "." + body))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, tss)
	req.Header.Set(webhook.HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	resp, err := insecureClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func updatedEvent(id, checksum string) string {
	return fmt.Sprintf(`{"data":{"node_id":%q,"checksum":%q,"storage_id":"s"},"id":"e","branch":"main","occured_at":"2025-03-13 16:44:32.321142+00:00","event":"infrahub.artifact.updated"}`, id, checksum)
}

// A changed artifact reaches the cluster through a webhook with one
// download and no query (its duplicate is a replay and costs nothing);
// forged, stale, oversized, unknown and replayed requests are refused alike,
// counted, and wake nothing.
func TestWebhookAppliesAChangeWithOneDownloadAndRefusesBadRequests(t *testing.T) {
	ns := namespace(t, "ihs-webhooks")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	webhookSecret(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "hooked-one", "v1"))
	s.SetArtifact("main", configMapArtifact(id2, "hooked-two", "v1"))
	s.AddWebhook(standin.Webhook{URL: hookURL(ns, "devices"), SharedKey: sharedKey, Client: insecureClient, RetryDelay: 200 * time.Millisecond})
	// No interval: with a webhook the poll comes every 10 minutes, not in
	// this test.
	createSync(t, ns, "devices", s, withWebhook(nil))
	waitConfigMap(t, ns, "hooked-one", "v1")
	waitSync(t, ns, "devices", "became Ready", syncReady)

	t.Log("a change: one download, no query, the object changed; its duplicate is a replay")
	s.ResetCounts()
	v0, p0 := verdicts(t), passes.of(ns, "devices")
	s.DuplicateWebhooks(1)
	s.SetArtifact("main", configMapArtifact(id1, "hooked-one", "v2"))
	waitConfigMap(t, ns, "hooked-one", "v2")
	// The duplicate is refused as a replay, retried and refused 3 times
	// more, then given up.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return s.Deliveries().Failed == 1, nil
	})
	if err != nil {
		t.Fatalf("the duplicate delivery was never given up: %+v", s.Deliveries())
	}
	if got := verdicts(t)[webhook.Replay] - v0[webhook.Replay]; got != 4 {
		t.Errorf("the duplicate and its 3 retries were refused as replays %v times, want 4", got)
	}
	if c := s.Counts(); c.Download != 1 || c.Total() != 1 {
		t.Errorf("the change cost Infrahub %+v; want exactly one download and nothing else", c)
	}
	if p := passes.of(ns, "devices"); p.webhook != p0.webhook+1 || p.passes != p0.passes+1 {
		t.Errorf("passes went from %+v to %+v; want one, woken by the webhook", p0, p)
	}

	t.Log("bad requests: the same 401 (413 oversized), counted, no pass, no request to Infrahub")
	s.ResetCounts()
	v0, p0 = verdicts(t), passes.of(ns, "devices")
	url, now := hookURL(ns, "devices"), time.Now()
	checks := []struct {
		what string
		code int
	}{
		{"forged", post(t, url, "a guessed key", "msg_forged", now, updatedEvent(id2, "f00"))},
		{"stale", post(t, url, sharedKey, "msg_stale", now.Add(-6*time.Minute), updatedEvent(id2, "f00"))},
		{"unknown sync", post(t, hookURL(ns, "nothing-here"), sharedKey, "msg_unknown", now, updatedEvent(id2, "f00"))},
		{"oversized", post(t, url, sharedKey, "msg_big", now, `{"pad":"`+strings.Repeat("x", webhook.DefaultMaxBodyBytes)+`"}`)},
	}
	for _, c := range checks {
		want := http.StatusUnauthorized
		if c.what == "oversized" {
			want = http.StatusRequestEntityTooLarge
		}
		if c.code != want {
			t.Errorf("%s request: answered %d, want %d", c.what, c.code, want)
		}
	}
	// The barrier: a good request wakes one pass (one download of content
	// already applied, no write), its replay none; a second good one wakes
	// another. Any pass the bad ones had woken would show as a third.
	if code := post(t, url, sharedKey, "msg_good_1", now, updatedEvent(id2, "f00")); code != http.StatusNoContent {
		t.Fatalf("a good request answered %d", code)
	}
	waitPasses(t, ns, "devices", p0.passes, 1)
	if code := post(t, url, sharedKey, "msg_good_1", now, updatedEvent(id2, "f00")); code != http.StatusUnauthorized {
		t.Errorf("a replayed request answered %d, want 401", code)
	}
	if code := post(t, url, sharedKey, "msg_good_2", now, updatedEvent(id2, "f01")); code != http.StatusNoContent {
		t.Fatalf("a good request answered %d", code)
	}
	waitPasses(t, ns, "devices", p0.passes, 2)
	if p := passes.of(ns, "devices"); p.passes != p0.passes+2 {
		t.Errorf("%d passes; want the barrier's 2 alone", p.passes-p0.passes)
	}
	if c := s.Counts(); c.Download != 2 || c.Total() != 2 {
		t.Errorf("Infrahub received %+v; want the barrier's 2 downloads alone", c)
	}
	v1 := verdicts(t)
	want := map[webhook.Verdict]float64{webhook.BadSignature: 1, webhook.Stale: 1, webhook.Unknown: 1, webhook.Malformed: 1, webhook.Accepted: 2, webhook.Replay: 1}
	for v, n := range want {
		if got := v1[v] - v0[v]; got != n {
			t.Errorf("verdict %s counted %v more times, want %v", v, got, n)
		}
	}
}

// The poll is the safety net: a change whose delivery is lost and a
// deleted artifact (Infrahub sends no event for it) arrive with it.
func TestPollCatchesLostDeliveriesAndDeletedArtifacts(t *testing.T) {
	ns := namespace(t, "ihs-webhook-poll")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	webhookSecret(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "polled-one", "v1"))
	s.SetArtifact("main", configMapArtifact(id2, "polled-two", "v1"))
	s.AddWebhook(standin.Webhook{URL: hookURL(ns, "devices"), SharedKey: sharedKey, Client: insecureClient, RetryDelay: 200 * time.Millisecond})
	createSync(t, ns, "devices", s, withWebhook(&metav1.Duration{Duration: 2 * time.Second}))
	waitConfigMap(t, ns, "polled-one", "v1")

	s.DropWebhooks(1)
	s.SetArtifact("main", configMapArtifact(id1, "polled-one", "v2"))
	waitConfigMap(t, ns, "polled-one", "v2")
	if d := s.Deliveries(); d.Dropped != 1 {
		t.Errorf("deliveries %+v: the change's was not the one dropped", d)
	}
	s.DeleteArtifact("main", id2)
	waitVRGone(t, ns, id2)
	waitConfigMapGone(t, ns, "polled-two")
}
