// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/rand"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// PathPrefix is where the receiver serves: PathPrefix + namespace/name.
const PathPrefix = "/hooks/infrahub/"

// DefaultMaxBodyBytes bounds a request's body. Infrahub's artifact events
// are under 1 KiB; 16 KiB leaves room for its other fields to grow.
const DefaultMaxBodyBytes = 16 << 10

// Verdict is what became of a request, the label of
// vidra_infrahubsync_webhooks_total.
type Verdict string

// The verdicts: a closed list, so that the metric's cardinality is bounded
// whatever tenants and strangers send.
const (
	// Accepted: verified and relevant; the sync was woken.
	Accepted Verdict = "accepted"
	// BadSignature: no signature verified, or the signing headers are
	// missing or malformed.
	BadSignature Verdict = "bad_signature"
	// Stale: the timestamp is outside ±Tolerance.
	Stale Verdict = "stale"
	// Replay: a webhook-id already accepted for this sync.
	Replay Verdict = "replay"
	// Unknown: no sync with a webhook at that path.
	Unknown Verdict = "unknown"
	// Ignored: verified, but about nothing the sync holds (another
	// branch, another artifact, a checksum already applied, another
	// event type).
	Ignored Verdict = "ignored"
	// Malformed: not a POST, not JSON, too large, or not a sync's path;
	// refused before the body is read.
	Malformed Verdict = "malformed"
)

var verdicts = []Verdict{Accepted, BadSignature, Stale, Replay, Unknown, Ignored, Malformed}

// Options configure a Receiver.
type Options struct {
	// Registry says which syncs have a webhook, with what key.
	Registry *Registry
	// Wake is called for an accepted event; it must not block.
	Wake func(key cache.ObjectName, w Wake)
	// Registerer receives vidra_infrahubsync_webhooks_total; nil keeps it
	// unregistered.
	Registerer prometheus.Registerer
	// Clock tells the time timestamps are checked against; nil means the
	// real clock.
	Clock clock.PassiveClock
	// MaxBodyBytes bounds a body; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ReplayEntries bounds the replay cache; zero means
	// DefaultReplayEntries.
	ReplayEntries int
	// Logger logs accepted and ignored events at debug level.
	Logger klog.Logger
}

// Receiver is the http.Handler of Infrahub's webhooks.
type Receiver struct {
	opts    Options
	clock   clock.PassiveClock
	replays *replayCache
	total   *prometheus.CounterVec
	// decoy is a random key, verified against for unknown syncs.
	decoy []byte
}

// NewReceiver returns a Receiver; serve it at PathPrefix.
func NewReceiver(opts Options) *Receiver {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Wake == nil {
		opts.Wake = func(cache.ObjectName, Wake) {}
	}
	decoy := make([]byte, 32)
	_, _ = rand.Read(decoy)
	r := &Receiver{opts: opts, clock: opts.Clock, replays: newReplayCache(opts.ReplayEntries), decoy: decoy,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_infrahubsync_webhooks_total",
			Help: "Webhook requests received from Infrahub, by verdict (accepted, bad_signature, stale, replay, unknown, ignored, malformed).",
		}, []string{"verdict"})}
	for _, v := range verdicts {
		r.total.WithLabelValues(string(v))
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(r.total)
	}
	return r
}

// Counter returns the requests counted with verdict v (tests and the bench
// read it).
func (r *Receiver) Counter(v Verdict) prometheus.Counter { return r.total.WithLabelValues(string(v)) }

// refusedBody is the one answer to a request that does not verify, whatever
// the reason: an unknown sync and a wrong signature look alike.
const refusedBody = "webhook refused"

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	v, key := r.serve(w, req)
	r.total.WithLabelValues(string(v)).Inc()
	if v == Accepted || v == Ignored {
		r.opts.Logger.V(4).Info("Infrahub webhook", "infrahubsync", key.String(), "verdict", v)
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) (Verdict, cache.ObjectName) {
	key, ok := syncKey(req.URL.Path)
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return Malformed, key
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return Malformed, key
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "only application/json", http.StatusUnsupportedMediaType)
		return Malformed, key
	}
	if req.ContentLength > r.opts.MaxBodyBytes {
		// Refused before a byte of the body is read.
		w.Header().Set("Connection", "close")
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return Malformed, key
	}
	h := Headers{ID: req.Header.Get(HeaderID), Timestamp: req.Header.Get(HeaderTimestamp), Signature: req.Header.Get(HeaderSignature)}
	now := r.clock.Now()
	// The cheap checks first: no HMAC for a request whose headers or
	// timestamp are already wrong.
	switch Timely(h, now) {
	case CheckBadHeaders:
		return r.refuse(w, BadSignature), key
	case CheckStale:
		return r.refuse(w, Stale), key
	}
	entry, known := r.opts.Registry.Get(key)
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
		}
		return Malformed, key
	}
	if !known {
		// The same work as for a sync that exists, with a key no one
		// holds: neither the answer nor its time tells which syncs exist.
		Verify(r.decoy, h, body, now)
		return r.refuse(w, Unknown), key
	}
	switch Verify(entry.Key, h, body, now) {
	case CheckValid, CheckValidSpaced:
	case CheckStale:
		return r.refuse(w, Stale), key
	default:
		return r.refuse(w, BadSignature), key
	}
	ts, _ := strconv.ParseInt(h.Timestamp, 10, 64)
	if r.replays.seenBefore(string(entry.UID), h.ID, time.Unix(ts, 0), now) {
		return r.refuse(w, Replay), key
	}
	// Verified: 2xx from here on, relevant or not, so that Infrahub does
	// not retry what was understood.
	w.WriteHeader(http.StatusNoContent)
	wake, relevant := Decide(entry.Target, body)
	if !relevant {
		return Ignored, key
	}
	r.opts.Wake(key, wake)
	return Accepted, key
}

func (r *Receiver) refuse(w http.ResponseWriter, v Verdict) Verdict {
	http.Error(w, refusedBody, http.StatusUnauthorized)
	return v
}

// syncKey reads namespace/name from a path under PathPrefix, both of
// which must be names Kubernetes could hold.
func syncKey(path string) (cache.ObjectName, bool) {
	rest, ok := strings.CutPrefix(path, PathPrefix)
	if !ok {
		return cache.ObjectName{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return cache.ObjectName{}, false
	}
	return cache.ObjectName{Namespace: ns, Name: name}, true
}
