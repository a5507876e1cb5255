// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sign is Infrahub's signing, written out here rather than through mac, so
// that the tests do not check the verifier against itself.
func sign(key, id, ts, payload string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(id + "." + ts + "." + payload))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

const (
	compactBody = `{"data":{"node_id":"18a0","checksum":"abc","storage_id":"s2"},"id":"e1","branch":"main","occured_at":"2025-03-13 16:44:32.321142+00:00","event":"infrahub.artifact.updated"}`
	spacedBody  = `{"data": {"node_id": "18a0", "checksum": "abc", "storage_id": "s2"}, "id": "e1", "branch": "main", "occured_at": "2025-03-13 16:44:32.321142+00:00", "event": "infrahub.artifact.updated"}`
)

func TestVerify(t *testing.T) {
	now := time.Unix(1_741_884_272, 0)
	ts := fmt.Sprint(now.Unix())
	key := "infrahub-shared-key"
	good := sign(key, "msg_1", ts, compactBody)
	other := sign("another key", "msg_1", ts, compactBody)
	tests := []struct {
		name string
		h    Headers
		body string
		want Check
	}{
		{"signed over the raw compact body (≥ 1.7.5)", Headers{"msg_1", ts, good}, compactBody, CheckValid},
		{"signed over the raw spaced body (1.2.10–1.6.x)", Headers{"msg_1", ts, sign(key, "msg_1", ts, spacedBody)}, spacedBody, CheckValid},
		{"signed spaced, sent compact (1.7.0–1.7.4)", Headers{"msg_1", ts, sign(key, "msg_1", ts, spacedBody)}, compactBody, CheckValidSpaced},
		{"signed as a Python dict repr (1.2.0–1.2.9)", Headers{"msg_1", ts, sign(key, "msg_1", ts, `{'data': {'node_id': '18a0'}}`)}, `{"data":{"node_id":"18a0"}}`, CheckBadSignature},
		{"several signatures, the second good", Headers{"msg_1", ts, other + " " + good}, compactBody, CheckValid},
		{"another key", Headers{"msg_1", ts, other}, compactBody, CheckBadSignature},
		{"a changed body", Headers{"msg_1", ts, good}, strings.Replace(compactBody, "abc", "abd", 1), CheckBadSignature},
		{"another id", Headers{"msg_2", ts, good}, compactBody, CheckBadSignature},
		{"a whsec_ secret's scheme (v1a)", Headers{"msg_1", ts, strings.Replace(good, "v1,", "v1a,", 1)}, compactBody, CheckBadSignature},
		{"a signature not base64", Headers{"msg_1", ts, "v1,@@@"}, compactBody, CheckBadSignature},
		{"the good signature past the eighth", Headers{"msg_1", ts, strings.Repeat(other+" ", MaxSignatures) + good}, compactBody, CheckBadSignature},
		{"5 minutes old", Headers{"msg_1", fmt.Sprint(now.Unix() - 300), sign(key, "msg_1", fmt.Sprint(now.Unix()-300), compactBody)}, compactBody, CheckValid},
		{"5 minutes and a second old", Headers{"msg_1", fmt.Sprint(now.Unix() - 301), sign(key, "msg_1", fmt.Sprint(now.Unix()-301), compactBody)}, compactBody, CheckStale},
		{"6 minutes ahead", Headers{"msg_1", fmt.Sprint(now.Unix() + 360), sign(key, "msg_1", fmt.Sprint(now.Unix()+360), compactBody)}, compactBody, CheckStale},
		{"a timestamp far out of range", Headers{"msg_1", "-9223372036854775808", good}, compactBody, CheckStale},
		{"a timestamp in milliseconds", Headers{"msg_1", ts + "000", good}, compactBody, CheckStale},
		{"no id", Headers{"", ts, good}, compactBody, CheckBadHeaders},
		{"an id too long", Headers{strings.Repeat("m", MaxIDBytes+1), ts, good}, compactBody, CheckBadHeaders},
		{"no signature", Headers{"msg_1", ts, ""}, compactBody, CheckBadHeaders},
		{"a signature header too long", Headers{"msg_1", ts, strings.Repeat("v1,x ", 300)}, compactBody, CheckBadHeaders},
		{"a timestamp not a number", Headers{"msg_1", "yesterday", good}, compactBody, CheckBadHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify([]byte(key), tt.h, []byte(tt.body), now); got != tt.want {
				t.Errorf("Verify = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSpaced(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"separators outside strings only", compactBody, spacedBody, true},
		// Python's json.dumps(ensure_ascii=False, separators=(",", ":"))
		// and json.dumps(...) of the same dict.
		{"non-ASCII and DEL escaped as Python does", "{\"n\":\"é\x7f😀 \\\"q\\\" a,b:c\",\"b\":null,\"l\":[1,2]}",
			`{"n": "\u00e9\u007f\ud83d\ude00 \"q\" a,b:c", "b": null, "l": [1, 2]}`, true},
		{"already spaced", spacedBody, "", false},
		{"pretty-printed", "{\n \"a\":1}", "", false},
		{"nothing to change", `"abc"`, "", false},
		{"not UTF-8", "{\"a\":\"\xff\"}", "", false},
		{"an unterminated string", `{"a":"b`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Spaced([]byte(tt.in))
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("Spaced = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	target := Target{Branch: "main", Applied: map[string]string{"a1": "sum1"}}
	body := func(event, branch, node, checksum string) string {
		b := "null"
		if branch != "" {
			b = fmt.Sprintf("%q", branch)
		}
		return fmt.Sprintf(`{"event":%q,"branch":%s,"data":{"node_id":%q,"checksum":%q,"storage_id":"s9"}}`, event, b, node, checksum)
	}
	tests := []struct {
		name  string
		body  string
		want  Wake
		wakes bool
	}{
		{"an update of a held artifact", body(EventArtifactUpdated, "main", "a1", "sum2"), Wake{ArtifactID: "a1", Checksum: "sum2", StorageID: "s9"}, true},
		{"an update without a checksum", body(EventArtifactUpdated, "main", "a1", ""), Wake{ArtifactID: "a1", StorageID: "s9"}, true},
		{"an update of no branch", body(EventArtifactUpdated, "", "a1", "sum2"), Wake{ArtifactID: "a1", Checksum: "sum2", StorageID: "s9"}, true},
		{"the checksum already applied (a duplicate or late delivery)", body(EventArtifactUpdated, "main", "a1", "sum1"), Wake{}, false},
		{"an update of another artifact", body(EventArtifactUpdated, "main", "zz", "sum2"), Wake{}, false},
		{"a created artifact the sync does not hold", body(EventArtifactCreated, "main", "new", "sum3"), Wake{Full: true}, true},
		{"a created artifact the sync holds", body(EventArtifactCreated, "main", "a1", "sum3"), Wake{ArtifactID: "a1", Checksum: "sum3", StorageID: "s9"}, true},
		{"another branch", body(EventArtifactUpdated, "feature", "a1", "sum2"), Wake{}, false},
		{"another event", body("infrahub.node.updated", "main", "a1", "sum2"), Wake{}, false},
		{"a node id that is no id", body(EventArtifactUpdated, "main", "../a1", "sum2"), Wake{}, false},
		{"not JSON", `{"event":`, Wake{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, wakes := Decide(target, []byte(tt.body))
			if got != tt.want || wakes != tt.wakes {
				t.Errorf("Decide = %+v, %v; want %+v, %v", got, wakes, tt.want, tt.wakes)
			}
		})
	}
}

func TestReplayCacheIsBoundedAndForgetsWhatTheTimestampRefuses(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := newReplayCache(3)
	if c.seenBefore("s", "a", now, now) {
		t.Fatal("a first delivery was taken for a replay")
	}
	if !c.seenBefore("s", "a", now, now.Add(time.Minute)) {
		t.Error("a replay within the tolerance was not caught")
	}
	if c.seenBefore("other", "a", now, now) {
		t.Error("the same id for another sync was taken for a replay")
	}
	if c.seenBefore("s", "a", now, now.Add(Tolerance+time.Second)) {
		t.Error("an id past the tolerance was still held (its timestamp refuses it anyway)")
	}
	for i := range 10 {
		c.seenBefore("s", fmt.Sprint(i), now, now)
	}
	if n := c.len(); n != 3 {
		t.Errorf("the cache holds %d ids, want its bound 3", n)
	}
	if !c.seenBefore("s", "9", now, now) {
		t.Error("the newest id was evicted")
	}
}

func TestSyncKey(t *testing.T) {
	for path, ok := range map[string]bool{
		"/hooks/infrahub/ns/sync":                        true,
		"/hooks/infrahub/ns/a.b-c":                       true,
		"/hooks/infrahub/ns":                             false,
		"/hooks/infrahub/ns/sync/x":                      false,
		"/hooks/infrahub/NS/sync":                        false,
		"/hooks/infrahub/../sync":                        false,
		"/hooks/other/ns/sync":                           false,
		"/hooks/infrahub//sync":                          false,
		"/hooks/infrahub/ns/" + strings.Repeat("a", 254): false,
	} {
		if _, got := syncKey(path); got != ok {
			t.Errorf("syncKey(%q) ok = %v, want %v", path, got, ok)
		}
	}
}
