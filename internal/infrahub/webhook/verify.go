// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers Infrahub sends.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Bounds of what a request may carry; beyond them it is refused unread.
const (
	// Tolerance is how far a webhook-timestamp may be from now, either
	// way: the Standard Webhooks recommendation, and wide enough for
	// Infrahub's clock and its queue.
	Tolerance = 5 * time.Minute
	// MaxIDBytes bounds webhook-id (Infrahub's are msg_ and 32 hex
	// digits).
	MaxIDBytes = 128
	// MaxSignatures is the most signatures of one header that are
	// compared; one is what Infrahub sends, a few allow a key rotation.
	MaxSignatures = 8
	// maxSignatureHeader bounds the signature header: MaxSignatures of
	// "v1," and 44 base64 characters, with room for other versions.
	maxSignatureHeader = 1024
)

// Headers are the signing headers of one request, as received.
type Headers struct {
	ID, Timestamp, Signature string
}

// Check is the verdict of the signature and timestamp checks.
type Check int

// The results of Verify.
const (
	// CheckValid: a signature verifies over the raw body.
	CheckValid Check = iota
	// CheckValidSpaced: a signature verifies only over the spaced
	// re-serialisation of the body (Infrahub 1.7.0 to 1.7.4).
	CheckValidSpaced
	// CheckBadHeaders: headers missing, too long, or not numbers.
	CheckBadHeaders
	// CheckStale: the timestamp is outside ±Tolerance.
	CheckStale
	// CheckBadSignature: no signature of the header verifies.
	CheckBadSignature
)

// Timely checks the headers' form and timestamp, which costs no HMAC: it
// is done before the sync is looked up.
func Timely(h Headers, now time.Time) Check {
	if h.ID == "" || len(h.ID) > MaxIDBytes || h.Signature == "" || len(h.Signature) > maxSignatureHeader || len(h.Timestamp) > 20 {
		return CheckBadHeaders
	}
	ts, err := strconv.ParseInt(h.Timestamp, 10, 64)
	if err != nil {
		return CheckBadHeaders
	}
	// Compared in seconds: a timestamp far out of time's range cannot
	// overflow a Duration.
	d := now.Unix() - ts
	if d > int64(Tolerance/time.Second) || d < -int64(Tolerance/time.Second) {
		return CheckStale
	}
	return CheckValid
}

// Verify checks the timestamp, then the signatures of h against body with
// key: first over the raw body, as Infrahub 1.2.10–1.6.x and ≥ 1.7.5 sign;
// then, if the body is compact JSON, over its spaced re-serialisation, as
// Infrahub 1.7.0–1.7.4 signed while sending compact JSON. Infrahub 1.2.0–
// 1.2.9 signed a Python dict repr, which no receiver can rebuild: those
// deliveries never verify, and the poll brings their changes.
//
// At most two HMACs are computed, however many signatures the header
// carries; each comparison takes constant time.
func Verify(key []byte, h Headers, body []byte, now time.Time) Check {
	if c := Timely(h, now); c != CheckValid {
		return c
	}
	sigs := signatures(h.Signature)
	if len(sigs) == 0 {
		return CheckBadSignature
	}
	if matches(sigs, mac(key, h.ID, h.Timestamp, body)) {
		return CheckValid
	}
	if spaced, ok := Spaced(body); ok && matches(sigs, mac(key, h.ID, h.Timestamp, spaced)) {
		return CheckValidSpaced
	}
	return CheckBadSignature
}

// mac is HMAC-SHA256(key, "{id}.{ts}.{payload}").
func mac(key []byte, id, ts string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(payload)
	return m.Sum(nil)
}

// signatures returns the decoded v1 signatures of a header (space
// separated "v1,<base64>" entries), at most MaxSignatures; entries of
// other versions or that do not decode are skipped.
func signatures(header string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(header) {
		if len(out) == MaxSignatures {
			break
		}
		v, sig, ok := strings.Cut(f, ",")
		if !ok || v != "v1" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			continue
		}
		out = append(out, b)
	}
	return out
}

// matches compares want with every signature in constant time each, and
// compares all of them, so that the time taken says nothing of which one
// matched.
func matches(sigs [][]byte, want []byte) bool {
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	return ok
}
