// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signing is how a Webhook signs its body, by Infrahub version.
type Signing int

const (
	// SigningCompact: Infrahub ≥ 1.7.5 sends compact JSON and signs it as
	// sent.
	SigningCompact Signing = iota
	// SigningSpaced: Infrahub 1.2.10–1.6.x sends JSON with ", " and ": "
	// separators and signs it as sent.
	SigningSpaced
	// SigningSpacedSentCompact: Infrahub 1.7.0–1.7.4 signs the spaced
	// form but sends the compact one.
	SigningSpacedSentCompact
)

// Webhook is a CoreStandardWebhook of node_kind CoreArtifact: it posts the
// artifact events of Branch ("" for all branches) to URL, signed with
// SharedKey.
type Webhook struct {
	URL       string
	SharedKey string
	Branch    string
	Signing   Signing
	// Client sends the deliveries; nil means http.DefaultClient. Infrahub's
	// validate_certificates false is a client that skips verification.
	Client *http.Client
	// Retries are the attempts after a failed one (non-2xx or no answer),
	// RetryDelay the wait between them: Infrahub's 3 and 2 minutes when
	// zero.
	Retries    int
	RetryDelay time.Duration
}

// Deliveries count what the webhooks sent.
type Deliveries struct {
	// Attempts are the requests sent, retries included; Delivered those
	// answered 2xx; Failed the events given up after the last retry;
	// Dropped the events lost on purpose (DropWebhooks).
	Attempts, Delivered, Failed, Dropped int
}

// AddWebhook registers w: every artifact created or changed from now on is
// posted to it, on a goroutine of its own, as Infrahub's task worker does.
func (s *Server) AddWebhook(w Webhook) {
	if w.Client == nil {
		w.Client = http.DefaultClient
	}
	if w.Retries == 0 {
		w.Retries = 3
	}
	if w.RetryDelay <= 0 {
		w.RetryDelay = 2 * time.Minute
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhooks = append(s.webhooks, w)
}

// DropWebhooks loses the next n events: a delivery that never comes.
func (s *Server) DropWebhooks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookDrops += n
}

// DuplicateWebhooks sends each of the next n events twice, with the same
// webhook-id, as a retry after a lost answer does.
func (s *Server) DuplicateWebhooks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookDuplicates += n
}

// DelayWebhooks holds each of the next n events for d before sending it: a
// late delivery, which may arrive after a later change.
func (s *Server) DelayWebhooks(n int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookDelays, s.webhookDelay = n, d
}

// Deliveries returns what the webhooks sent.
func (s *Server) Deliveries() Deliveries {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deliveries
}

// notify posts change to every webhook whose branch it is on.
func (s *Server) notify(c Change) {
	s.mu.Lock()
	hooks := append([]Webhook(nil), s.webhooks...)
	drop := s.webhookDrops > 0
	if drop {
		s.webhookDrops--
	}
	dup := !drop && s.webhookDuplicates > 0
	if dup {
		s.webhookDuplicates--
	}
	var delay time.Duration
	if !drop && s.webhookDelays > 0 {
		s.webhookDelays--
		delay = s.webhookDelay
	}
	s.mu.Unlock()
	for _, w := range hooks {
		if w.Branch != "" && w.Branch != c.Branch {
			continue
		}
		if drop {
			s.count(func(d *Deliveries) { d.Dropped++ })
			continue
		}
		id := "msg_" + hex.EncodeToString(randomBytes(16))
		compact, spaced := eventBodies(c, newID())
		sends := 1
		if dup {
			sends = 2
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if delay > 0 && !s.sleep(delay) {
				return
			}
			for range sends {
				s.deliver(w, id, compact, spaced)
			}
		}()
	}
}

// deliver posts one event, retrying as Infrahub does.
func (s *Server) deliver(w Webhook, id string, compact, spaced []byte) {
	for attempt := 0; attempt <= w.Retries; attempt++ {
		if attempt > 0 && !s.sleep(w.RetryDelay) {
			return
		}
		body, signed := compact, compact
		switch w.Signing {
		case SigningSpaced:
			body, signed = spaced, spaced
		case SigningSpacedSentCompact:
			signed = spaced
		}
		ts := strconv.FormatInt(s.now().Unix(), 10)
		m := hmac.New(sha256.New, []byte(w.SharedKey))
		m.Write([]byte(id + "." + ts + "."))
		m.Write(signed)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
		if err != nil {
			cancel()
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		s.count(func(d *Deliveries) { d.Attempts++ })
		resp, err := w.Client.Do(req)
		ok := err == nil && resp.StatusCode/100 == 2
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if ok {
			s.count(func(d *Deliveries) { d.Delivered++ })
			return
		}
	}
	s.count(func(d *Deliveries) { d.Failed++ })
}

func (s *Server) count(f func(*Deliveries)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.deliveries)
}

// sleep waits d, or until Close; it reports whether d passed.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// eventBodies returns the event's body in the compact form (httpx's, since
// Infrahub 1.7) and in the spaced form of Python's json.dumps, with
// Infrahub's keys in Infrahub's order and its spelling occured_at.
func eventBodies(c Change, eventID string) (compact, spaced []byte) {
	str := func(v string) jsonValue { return jsonValue{value: v} }
	data := []pair{
		{"node_id", str(c.ID)}, {"artifact_definition_id", str(c.DefinitionID)},
		{"target_id", str(c.Target)}, {"target_kind", str("DcimDevice")},
		{"checksum", str(c.Checksum)}, {"checksum_previous", nullable(c.ChecksumPrevious)},
		{"storage_id", str(c.StorageID)}, {"storage_id_previous", nullable(c.StorageIDPrevious)},
	}
	top := []pair{
		{"data", jsonValue{object: data}}, {"id", str(eventID)}, {"branch", str(c.Branch)},
		{"account_id", jsonValue{null: true}},
		{"occured_at", str(c.OccurredAt.UTC().Format("2006-01-02 15:04:05.000000-07:00"))},
		{"event", str(c.Event)},
	}
	return encode(top, ",", ":"), encode(top, ", ", ": ")
}

type pair struct {
	key   string
	value jsonValue
}

type jsonValue struct {
	value  string
	null   bool
	object []pair
}

func nullable(v string) jsonValue { return jsonValue{value: v, null: v == ""} }

// encode writes pairs as a JSON object with the separators given. The
// values are ids, checksums, branch names and times: ASCII, which both of
// Python's forms write as json.Marshal does.
func encode(pairs []pair, comma, colon string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(comma)
		}
		k, _ := json.Marshal(p.key)
		b.Write(k)
		b.WriteString(colon)
		switch {
		case p.value.object != nil:
			b.Write(encode(p.value.object, comma, colon))
		case p.value.null:
			b.WriteString("null")
		default:
			v, _ := json.Marshal(p.value.value)
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// String is the signing's name, for flags.
func (g Signing) String() string {
	switch g {
	case SigningSpaced:
		return "spaced"
	case SigningSpacedSentCompact:
		return "1.7.0"
	}
	return "compact"
}

// ParseSigning reads a Signing's name: compact, spaced or 1.7.0.
func ParseSigning(v string) (Signing, error) {
	for _, g := range []Signing{SigningCompact, SigningSpaced, SigningSpacedSentCompact} {
		if g.String() == v {
			return g, nil
		}
	}
	return 0, fmt.Errorf("signing %q: want compact (≥ 1.7.5), spaced (1.2.10–1.6.x) or 1.7.0 (1.7.0–1.7.4: signed spaced, sent compact)", v)
}
