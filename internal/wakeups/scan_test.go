// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scanSeeds are lines the one-pass scanner must read as encoding/json
// does, or hand over to it.
var scanSeeds = []string{
	`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/configmaps/x?x=1","verb":"get","user":{"username":"u","groups":["g1","g2"],"extra":{"k":["v"]}},"sourceIPs":["10.0.0.1"],"userAgent":"c/v1 (linux/amd64) kubernetes/abc","objectRef":{"resource":"configmaps","namespace":"a","name":"x","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-01T10:00:00.123456Z","stageTimestamp":"2026-11-01T10:00:00.125Z","annotations":{"authorization.k8s.io/decision":"allow"}}`,
	`{ "auditID" : "b" , "stage":"ResponseStarted", "verb":"watch", "objectRef": null, "responseStatus": null, "requestReceivedTimestamp":"2026-11-01T10:00:00Z", "n": -1.5e3, "t": true, "f": false, "z": null, "a": [[], {}, [{"x": "]}"}]] }`,
	`{"auditID":"c\u0041","stage":"ResponseComplete","userAgent":"caf\u00e9 \"quoted\"","user":{"username":"naïve"},"requestReceivedTimestamp":"2026-11-01T10:00:00Z","responseObject":{"kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"42","labels":{"a":"b"}},"data":{"k":"v\n"}}}`,
	`{"auditID":"d","stage":"ResponseComplete","objectRef":{"name":"a"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-01T10:00:00Z"}`,
	`{"auditID":"e","stage":"ResponseComplete","responseStatus":{"code":200.5},"requestReceivedTimestamp":"2026-11-01T10:00:00Z"}`,
	`{"auditID":"f","stage":"ResponseComplete","requestReceivedTimestamp":"yesterday"}`,
	`{"auditID":"g","stage":"ResponseComplete","requestReceivedTimestamp":"2026-11-01T10:00:00Z"} trailing`,
	`{"auditID":"h","stage":"ResponseComplete","x":[}`,
	`{"auditID":"i","stage":"ResponseComplete","x":tru}`,
	`{"AuditID":"j","stage":"ResponseComplete","requestReceivedTimestamp":"2026-11-01T10:00:00Z"}`,
	"{\"auditID\":\"k\xff\",\"stage\":\"ResponseComplete\",\"requestReceivedTimestamp\":\"2026-11-01T10:00:00Z\"}",
	`{"auditID":"l","stage":"ResponseComplete","user":null,"requestReceivedTimestamp":"2026-11-01T10:00:00Z"}`,
	`[1,2]`, `"x"`, ``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`,
}

// checkScan fails t when scanEvent accepts line and reads it otherwise
// than encoding/json.
func checkScan(t *testing.T, line []byte) {
	var fast, slow event
	if !scanEvent(line, &fast) {
		return
	}
	if err := json.Unmarshal(line, &slow); err != nil {
		// Only what the analysis skips is not validated: a line
		// encoding/json refuses for a value inside a skipped object may
		// pass. The fields read must still be sound.
		if !json.Valid(line) {
			return
		}
		t.Fatalf("scanned %q, which encoding/json refuses: %v", line, err)
	}
	if diff := cmp.Diff(slow, fast, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Fatalf("%q: scanner differs from encoding/json (-json +scan):\n%s", line, diff)
	}
}

func TestScanReadsAsEncodingJSON(t *testing.T) {
	for _, l := range scanSeeds {
		checkScan(t, []byte(l))
	}
	var g gen
	g.add(req{user: "u", ua: ctrlUA, verb: "update", resource: "configmaps", sub: "status", ns: "a", name: "x", query: "a=b", rv: "7"})
	for _, l := range bytes.Split(g.buf.Bytes(), []byte("\n")) {
		var ev event
		if len(l) > 0 && !scanEvent(l, &ev) {
			t.Fatalf("an API server's line goes the slow way: %s", l)
		}
		checkScan(t, l)
	}
}

func FuzzScanReadsAsEncodingJSON(f *testing.F) {
	for _, l := range scanSeeds {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkScan(t, line) })
}
