package destination

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// breakerCooldown is how long requests to a server that just failed at the
// connection level fail at once, without touching the network. Workers are
// shared by every destination: without it each resource of a dead cluster
// would spend a dial (up to the request timeout on a black-holed address) on
// every object of every retry.
const breakerCooldown = 2 * time.Second

// unreachableError reports that a destination's API server could not be
// reached at all (connection refused, timeout, TLS failure), as opposed to an
// answer from it. It is reported as DestinationError.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	if tooLarge := (*answerTooLargeError)(nil); errors.As(e.err, &tooLarge) {
		// The server answered, too much: it says so itself.
		return tooLarge.Error()
	}
	return fmt.Sprintf("API server %s is unreachable: %v", e.server, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// IsUnreachable reports whether err, or an error it wraps, says that a
// destination's API server could not be reached at all.
func IsUnreachable(err error) bool { return Unreachable(err) != nil }

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
// kind closes it again.
//
// Its transitions wake the cluster's resources: onTrip, because reconciles
// served from the informers' caches make no request and would otherwise go
// on reporting Ready; onRecover, so that they need not wait out a backoff
// grown during the outage.
type breaker struct {
	server    string
	clock     clock.PassiveClock
	onTrip    func()
	onRecover func()

	mu       sync.Mutex
	err      error // the last connection error; nil while closed
	failedAt time.Time
	trial    bool // a trial request is in flight
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

func newBreaker(server string, clk clock.PassiveClock) *breaker {
	return &breaker{server: server, clock: clk}
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
	if b.err != nil && (b.trial || b.clock.Since(b.failedAt) < breakerCooldown) {
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
	if b.trial || b.clock.Since(b.failedAt) < breakerCooldown {
		return false, &unreachableError{server: b.server, err: b.err}
	}
	b.trial = true
	return true, nil
}

// after records the outcome of a request admitted by before.
func (b *breaker) after(trial bool, req *http.Request, err error) {
	b.mu.Lock()
	if trial {
		b.trial = false
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
	case errors.Is(req.Context().Err(), context.Canceled):
		// The caller gave up (an informer stopping, a reconcile cancelled at
		// shutdown): that says nothing about the server.
	default:
		tripped := b.err == nil
		b.err, b.failedAt = err, b.clock.Now()
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
	tripped := b.err == nil
	b.err, b.failedAt = err, b.clock.Now()
	b.mu.Unlock()
	if tripped && b.onTrip != nil {
		b.onTrip()
	}
}

// wrap is a rest.Config WrapTransport: it sits right above the TLS
// transport, so it sees dial and handshake errors before anything else.
func (b *breaker) wrap(rt http.RoundTripper) http.RoundTripper {
	return &breakerTransport{b: b, next: rt}
}

type breakerTransport struct {
	b    *breaker
	next http.RoundTripper
}

func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	trial, err := t.b.before()
	if err != nil {
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	t.b.after(trial, req, err)
	if err != nil && !errors.Is(req.Context().Err(), context.Canceled) {
		return nil, &unreachableError{server: t.b.server, err: err}
	}
	return resp, err
}

// WrappedRoundTripper lets client-go reach the transport underneath, to
// close its idle connections.
func (t *breakerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
