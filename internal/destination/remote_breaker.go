// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

// breakerCooldown is how long requests to a server that just failed at the
// connection level fail at once, without touching the network. Workers are
// shared by every destination: without it each resource of a dead cluster
// would spend a dial (up to the request timeout on a black-holed address) on
// every object of every retry.
const breakerCooldown = 2 * time.Second

// DefaultSlowAnswer is how long a remote API server may take to answer a
// request before Vidra treats it as unavailable. API servers answer in
// milliseconds; an admission webhook may add a few seconds. A server that
// answers every request just under remoteTimeout trips nothing else, yet
// holds a shared worker for the whole of each request, and a reconcile of
// many objects for minutes: every other namespace waits for a worker.
const DefaultSlowAnswer = 5 * time.Second

// slowCooldown is how long requests to a server that answered too slowly
// fail at once. It is longer than breakerCooldown: a slow server is up,
// and answers its trial fast or slowly at its owner's will; what matters is
// how often it may hold a worker for a slow answer again.
const slowCooldown = 30 * time.Second

// slowAnswerError says that a server answered, but after the time Vidra
// waits for an answer: the server is taken for unavailable.
type slowAnswerError struct {
	method, path string
	took, limit  time.Duration
}

func (e *slowAnswerError) Error() string {
	return fmt.Sprintf("it answered %s %s after %s, and Vidra treats a server slower than %s as unavailable (requests to it fail for %s, then are tried again)",
		e.method, e.path, e.took.Round(100*time.Millisecond), e.limit, slowCooldown)
}

// unreachableError reports that a destination's API server could not be
// reached at all (connection refused, timeout, TLS failure), as opposed to an
// answer from it. It is reported as DestinationError.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	if over := guard.OverLimit(e.err); over != nil {
		// The server answered, too much: it says so itself.
		return over.Error()
	}
	return fmt.Sprintf("API server %s is unreachable: %v", e.server, certificateProblem(e.err))
}

func (e *unreachableError) Unwrap() error { return e.err }

// IsUnreachable reports whether err, or an error it wraps, says that a
// destination's API server could not be reached at all.
func IsUnreachable(err error) bool { return Unreachable(err) != nil }

// Readable is err as a condition message says it: when the destination's
// API server could not be reached, that alone, without the request that
// found it out (`Get "https://…/version?timeout=15s": `), which names the
// server a second time and tells a person nothing more.
func Readable(err error) error {
	if u := Unreachable(err); u != nil {
		return u
	}
	return err
}

// Unreachable returns the error in err's chain that says a destination's API
// server could not be reached, or nil: of the errors of many objects that
// failed the same way, it is the one that explains them all.
func Unreachable(err error) error {
	var u *unreachableError
	if errors.As(err, &u) {
		return u
	}
	return nil
}

// breaker is a circuit breaker in the transport of one remote cluster's
// clients (requests, discovery, informers, impersonated clients alike).
// After a connection-level failure it fails requests fast for a cooldown,
// then lets one trial request through at a time; the first response of any
// kind closes it again. An answer to a request a reconcile waits for that
// comes after slow counts as a failure: a server that answers just under
// the request timeout would otherwise hold workers without end.
//
// Its transitions wake the cluster's resources: onTrip, because reconciles
// served from the informers' caches make no request and would otherwise go
// on reporting Ready; onRecover, so that they need not wait out a backoff
// grown during the outage.
type breaker struct {
	server    string
	clock     clock.PassiveClock
	slow      time.Duration
	onTrip    func()
	onRecover func()

	mu       sync.Mutex
	err      error // the last connection error; nil while closed
	failedAt time.Time
	cooldown time.Duration // of the last failure
	trial    bool          // a trial request is in flight
	// answeredAt is when a request last got an answer. A server that hangs
	// (accepts connections, answers nothing) trips nothing while reconciles
	// read from caches and its watches wait in silence; how long it has
	// been quiet is what tells.
	answeredAt time.Time
}

// answeredWithin reports whether a request got an answer less than d ago.
func (b *breaker) answeredWithin(d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.answeredAt.IsZero() && b.clock.Since(b.answeredAt) < d
}

// newBreaker returns the breaker of server; slow is the time an answer may
// take, zero meaning DefaultSlowAnswer.
func newBreaker(server string, clk clock.PassiveClock, slow time.Duration) *breaker {
	if slow <= 0 {
		slow = DefaultSlowAnswer
	}
	return &breaker{server: server, clock: clk, slow: slow}
}

// isOpen reports whether the last request failed at the connection level.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

// check fails while the breaker is open and cooling down, or while a trial
// is in flight; resolve calls it so that a resource of a dead cluster fails
// before it does any work.
func (b *breaker) check() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil && (b.trial || b.clock.Since(b.failedAt) < b.cooldown) {
		return &unreachableError{server: b.server, err: b.err}
	}
	return nil
}

// before admits a request: always while closed; while open, only one trial
// once the cooldown has passed.
func (b *breaker) before() (trial bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		return false, nil
	}
	if b.trial || b.clock.Since(b.failedAt) < b.cooldown {
		return false, &unreachableError{server: b.server, err: b.err}
	}
	b.trial = true
	return true, nil
}

// after records the outcome of a request admitted by before, which took
// took; timed says whether a worker waited for it, and its time counts.
func (b *breaker) after(trial bool, req *http.Request, err error, took time.Duration, timed bool) {
	b.mu.Lock()
	if trial {
		b.trial = false
	}
	cooldown := breakerCooldown
	if (err == nil || guard.RefusedAnswer(err) != nil) && timed && took >= b.slow {
		// A refused answer fails its request only, unless it came slowly:
		// a server that trickles answers just over their bound would
		// otherwise hold a worker per request, without end.
		err, cooldown = &slowAnswerError{method: req.Method, path: req.URL.Path, took: took, limit: b.slow}, slowCooldown
	}
	switch {
	case err == nil:
		recovered := b.err != nil
		b.err, b.answeredAt = nil, b.clock.Now()
		b.mu.Unlock()
		if recovered && b.onRecover != nil {
			b.onRecover()
		}
		return
	case callerGaveUp(req) || guard.RefusedAnswer(err) != nil:
		// The caller gave up (an informer stopping, a reconcile cancelled at
		// shutdown or out of time), or one answer was refused for what it
		// would make Vidra hold: that says nothing about the server.
	default:
		tripped := b.tripLocked(err, cooldown)
		b.mu.Unlock()
		if tripped && b.onTrip != nil {
			b.onTrip()
		}
		return
	}
	b.mu.Unlock()
}

// fail records a failure found after a request got its answer (a watch
// event over its limit), as after records one of the request itself.
func (b *breaker) fail(err error) {
	b.mu.Lock()
	tripped := b.tripLocked(err, breakerCooldown)
	b.mu.Unlock()
	if tripped && b.onTrip != nil {
		b.onTrip()
	}
}

// tripLocked records a failure, which fails requests for cooldown; it
// reports whether the breaker was closed until then. b.mu is held.
func (b *breaker) tripLocked(err error, cooldown time.Duration) bool {
	tripped := b.err == nil
	b.err, b.failedAt, b.cooldown = err, b.clock.Now(), cooldown
	return tripped
}

// wrap is a rest.Config WrapTransport of the clients reconciles wait on: it
// sits above the TLS transport and the answer guard, so it sees dial and
// handshake errors before anything else, and times answers read whole.
func (b *breaker) wrap(rt http.RoundTripper) http.RoundTripper {
	return &breakerTransport{b: b, next: rt, timed: true}
}

// wrapUntimed is wrap for the informers' clients, whose lists and watches
// run on the informers' goroutines, never on a worker's: a long list of a
// large cluster is no sign of a hostile server, and a watch lasts minutes
// by design. Their failures still trip the breaker.
func (b *breaker) wrapUntimed(rt http.RoundTripper) http.RoundTripper {
	return &breakerTransport{b: b, next: rt}
}

type breakerTransport struct {
	b     *breaker
	next  http.RoundTripper
	timed bool
}

func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	trial, err := t.b.before()
	if err != nil {
		return nil, err
	}
	start := t.b.clock.Now()
	resp, err := t.next.RoundTrip(req)
	// A watch's answer returns with its headers; what follows is a stream
	// whose length says nothing.
	t.b.after(trial, req, err, t.b.clock.Since(start), t.timed && !guard.IsWatch(req))
	if err != nil && !callerGaveUp(req) && guard.RefusedAnswer(err) == nil {
		return nil, &unreachableError{server: t.b.server, err: err}
	}
	return resp, err
}

// callerGaveUp reports a request whose context its caller ended: cancelled,
// or out of the time of a reconcile (WithReconcileDeadline). A request's own
// timeout is a failure of the server.
func callerGaveUp(req *http.Request) bool {
	ctx := req.Context()
	return errors.Is(ctx.Err(), context.Canceled) || OutOfTime(ctx) != nil
}

// WrappedRoundTripper lets client-go reach the transport underneath, to
// close its idle connections.
func (t *breakerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// certificateProblem words a failed TLS verification for the resource's
// status, which its namespace reads: Go's own error lists every name the
// server's certificate is valid for, and a tenant probing the addresses a
// remote destination may reach would learn the internal names of the
// services there. What the owner of the kubeconfig must fix stays said.
// Other errors are returned as they are.
func certificateProblem(err error) error {
	var host x509.HostnameError
	if errors.As(err, &host) {
		return fmt.Errorf("its TLS certificate is not valid for %s: check the server's name in destination.server and the kubeconfig", host.Host)
	}
	var authority x509.UnknownAuthorityError
	if errors.As(err, &authority) {
		return errors.New("its TLS certificate is not signed by an authority the kubeconfig trusts: check its certificate-authority-data")
	}
	return err
}
