// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// Every kind of request gets its verdict, counted; the refusals all look
// alike; only the accepted one wakes the sync.
func TestReceiverVerdicts(t *testing.T) {
	now := time.Unix(1_741_884_272, 0)
	reg := NewRegistry()
	key := cache.ObjectName{Namespace: "ns", Name: "devices"}
	reg.Set(key, &Entry{UID: "u1", Key: []byte("k"), Target: Target{Branch: "main", Applied: map[string]string{"18a0": "old"}}})
	var woken []Wake
	r := NewReceiver(Options{Registry: reg, Clock: clocktesting.NewFakePassiveClock(now), Wake: func(k cache.ObjectName, w Wake) {
		if k != key {
			t.Errorf("woke %v, want %v", k, key)
		}
		woken = append(woken, w)
	}})
	ts := fmt.Sprint(now.Unix())
	post := func(path, id, ts, sig, body string, mutate ...func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderID, id)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, sig)
		for _, m := range mutate {
			m(req)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	path := "/hooks/infrahub/ns/devices"
	good := sign("k", "msg_1", ts, compactBody)
	steps := []struct {
		name    string
		rec     *httptest.ResponseRecorder
		code    int
		verdict Verdict
	}{
		{"a good delivery", post(path, "msg_1", ts, good, compactBody), http.StatusNoContent, Accepted},
		{"its replay", post(path, "msg_1", ts, good, compactBody), http.StatusUnauthorized, Replay},
		{"a forged signature", post(path, "msg_2", ts, sign("guess", "msg_2", ts, compactBody), compactBody), http.StatusUnauthorized, BadSignature},
		{"an unknown sync", post("/hooks/infrahub/ns/other", "msg_3", ts, sign("k", "msg_3", ts, compactBody), compactBody), http.StatusUnauthorized, Unknown},
		{"a stale one", post(path, "msg_4", "1000", sign("k", "msg_4", "1000", compactBody), compactBody), http.StatusUnauthorized, Stale},
		{"no signing headers", post(path, "", "", "", compactBody), http.StatusUnauthorized, BadSignature},
		{"the checksum already applied", post(path, "msg_5", ts, sign("k", "msg_5", ts, strings.Replace(compactBody, "abc", "old", 1)), strings.Replace(compactBody, "abc", "old", 1)), http.StatusNoContent, Ignored},
		{"oversized", post(path, "msg_6", ts, good, `{"a":"`+strings.Repeat("x", DefaultMaxBodyBytes)+`"}`), http.StatusRequestEntityTooLarge, Malformed},
		{"not JSON", post(path, "msg_7", ts, good, compactBody, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }), http.StatusUnsupportedMediaType, Malformed},
		{"a GET", post(path, "msg_8", ts, good, "", func(r *http.Request) { r.Method = http.MethodGet }), http.StatusMethodNotAllowed, Malformed},
	}
	for _, s := range steps {
		if s.rec.Code != s.code {
			t.Errorf("%s: answered %d, want %d", s.name, s.rec.Code, s.code)
		}
		if s.code == http.StatusUnauthorized && s.rec.Body.String() != refusedBody+"\n" {
			t.Errorf("%s: answered %q, want the one refusal %q", s.name, s.rec.Body.String(), refusedBody)
		}
	}
	want := map[Verdict]float64{Accepted: 1, Replay: 1, BadSignature: 2, Unknown: 1, Stale: 1, Ignored: 1, Malformed: 3}
	for _, v := range verdicts {
		m := &dto.Metric{}
		if err := r.Counter(v).Write(m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != want[v] {
			t.Errorf("verdict %s counted %v times, want %v", v, got, want[v])
		}
	}
	if len(woken) != 1 || woken[0] != (Wake{ArtifactID: "18a0", Checksum: "abc", StorageID: "s2"}) {
		t.Errorf("woke %+v, want one wake-up for artifact 18a0", woken)
	}
}
