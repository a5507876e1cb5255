// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Defaults of Options.
const (
	// DefaultAllowTTL is how long an allowed token is let through without a
	// new review: a scraper every 15 s costs two reviews a minute, and a
	// binding removed or a token revoked takes effect within a minute.
	DefaultAllowTTL = time.Minute
	// DefaultDenyTTL is how long a refused token stays refused without a
	// new review; short, so that a scraper bound just now gets in soon.
	DefaultDenyTTL = 10 * time.Second
	// DefaultCacheSize bounds each of the two caches, of allowed and of
	// refused tokens: a few scrapers need a few entries, and 256 entries of
	// a hash and a user name are a few tens of KiB at most.
	DefaultCacheSize = 256
	// DefaultMaxReviews bounds the reviews in flight. A scraper with a
	// cached decision needs none, so this is only ever reached by many new
	// tokens at once, which is what a hostile client sends.
	DefaultMaxReviews = 4
	// DefaultQueueWait is how long a request waits for a free review slot
	// before it is refused with 503.
	DefaultQueueWait = time.Second
	// DefaultReviewTimeout bounds the two reviews of one token together.
	DefaultReviewTimeout = 5 * time.Second
)

// Options configure an Authorizer. Zero values take the defaults.
type Options struct {
	// Client sends the TokenReviews and SubjectAccessReviews; its identity
	// needs create on both (manifests/rbac/cluster_role.yaml).
	Client kubernetes.Interface
	// Path is the non-resource URL a token's identity must be allowed to
	// get; default /metrics.
	Path string
	// AllowTTL and DenyTTL are how long an allowed, or refused, decision
	// is reused, from the start of its review.
	AllowTTL, DenyTTL time.Duration
	// CacheSize bounds the decisions kept, allowed and refused each.
	CacheSize int
	// MaxReviews bounds the reviews in flight; QueueWait is how long a
	// request waits for one to end before it is refused.
	MaxReviews int
	QueueWait  time.Duration
	// ReviewTimeout bounds the reviews of one token.
	ReviewTimeout time.Duration
	// Clock tells the age of cached decisions and times the queue wait.
	Clock clock.Clock
	// Logger receives the refusals a review decided (at debug level) and
	// failed reviews, each at most every 10 s.
	Logger klog.Logger
}

// Authorizer lets a request through to the handler it wraps only with a
// bearer token whose identity may get Options.Path. It is safe for
// concurrent use.
type Authorizer struct {
	opts   Options
	logger klog.Logger
	// allowed and refused are separate so that refused tokens, which
	// anyone can make up by the thousand, only ever evict each other, never
	// a scraper's allowed decision.
	allowed, refused *lru.Cache
	// mu makes a look-up, or a store, in the two caches one step: a store
	// reads what is cached before it writes, and a look-up removes what
	// expired, which must not be a decision stored in between.
	mu sync.Mutex
	// slots holds a token per review in flight.
	slots chan struct{}
	// failures and refusals keep an API server that cannot answer, or a
	// client sending made-up tokens, from writing a log line per request.
	failures, refusals rate.Sometimes
}

type verdict int

const (
	allow verdict = iota
	unauthenticated
	forbidden
)

// decision is the outcome of the reviews of one token.
type decision struct {
	verdict verdict
	// user is the reviewed identity, for the 403 message and the logs.
	user string
	// reviewed is when its reviews started: the API server answered for
	// its state at some time after, so an age counted from here errs
	// towards expiring the decision early.
	reviewed time.Time
	expires  time.Time
}

// reviewError is a review that did not answer: the request is refused with
// status, since whether the token may get the path is not known.
type reviewError struct {
	status int
	err    error
}

func (e *reviewError) Error() string { return e.err.Error() }
func (e *reviewError) Unwrap() error { return e.err }

// NewAuthorizer returns an Authorizer that reviews tokens with
// opts.Client.
func NewAuthorizer(opts Options) *Authorizer {
	if opts.Path == "" {
		opts.Path = "/metrics"
	}
	if opts.AllowTTL <= 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL <= 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MaxReviews <= 0 {
		opts.MaxReviews = DefaultMaxReviews
	}
	if opts.QueueWait <= 0 {
		opts.QueueWait = DefaultQueueWait
	}
	if opts.ReviewTimeout <= 0 {
		opts.ReviewTimeout = DefaultReviewTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Authorizer{
		opts:     opts,
		logger:   opts.Logger,
		allowed:  lru.New(opts.CacheSize),
		refused:  lru.New(opts.CacheSize),
		slots:    make(chan struct{}, opts.MaxReviews),
		failures: rate.Sometimes{Interval: 10 * time.Second},
		// As often as a refused scraper is reviewed again (DenyTTL): one
		// alone has each of its refusals logged.
		refusals: rate.Sometimes{Interval: 10 * time.Second},
	}
}

// Wrap returns next guarded: GET and HEAD only, and only with a bearer token
// allowed to get Options.Path. It answers 401 without a token the API server
// accepts, 403 when the token's identity may not get the path, 503 when the
// reviews cannot be made now (the API server does not answer, or too many
// are in flight: a scraper tries again at its next interval), and 500 when
// the API server refuses the operator itself the reviews, a fault of its
// install or its credentials that no retry of the scraper mends. Every
// refusal closes its connection.
func (a *Authorizer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The review asks for the verb get, which the API server maps from
		// GET and HEAD only.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			refuse(w, http.StatusMethodNotAllowed, "Method not allowed")
			return
		}
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			a.unauthorized(w)
			return
		}
		d, reviewed, err := a.decide(r.Context(), token)
		if err != nil {
			var re *reviewError
			if !errors.As(err, &re) {
				re = &reviewError{status: http.StatusServiceUnavailable, err: err}
			}
			a.failures.Do(func() {
				a.logger.Error(err, "Cannot check a request's token; refusing it", "status", re.status, "path", a.opts.Path)
			})
			if re.status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "5")
				refuse(w, re.status, "Service Unavailable: the token could not be checked now; try again")
				return
			}
			refuse(w, re.status, "Internal Server Error: the operator may not check tokens; its log says why")
			return
		}
		// Only refusals a review decided are logged: one from the cache was
		// up for logging when it was reviewed, and a client repeating a
		// refused token must not write a line per request.
		switch d.verdict {
		case allow:
			next.ServeHTTP(w, r)
		case unauthenticated:
			if reviewed {
				a.refusals.Do(func() {
					a.logger.V(1).Info("Refused a request: its token is not valid", "path", a.opts.Path, "remote", r.RemoteAddr)
				})
			}
			a.unauthorized(w)
		default:
			if reviewed {
				a.refusals.Do(func() {
					a.logger.V(1).Info("Refused a request: its identity may not get the path", "path", a.opts.Path, "user", d.user, "remote", r.RemoteAddr)
				})
			}
			refuse(w, http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not get path %q (bind it to a ClusterRole allowing it, such as vidra-metrics-reader)", d.user, a.opts.Path))
		}
	})
}

func (a *Authorizer) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="vidra"`)
	refuse(w, http.StatusUnauthorized, "Unauthorized: send a bearer token the API server accepts (Authorization: Bearer <token>)")
}

// refuse answers status and closes the connection after the answer: a
// refused client has nothing more to ask on it, and kept alive it would hold
// one of the server's capped connections for the idle timeout.
func refuse(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Connection", "close")
	http.Error(w, message, status)
}

// bearerToken reads the token of an Authorization header; the scheme is
// case-insensitive (RFC 9110).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// decide returns the decision for token, from the cache or from reviews,
// and whether reviews made it. The cache is keyed by the token's SHA-256, so
// that no token stays in the process's memory after its request.
func (a *Authorizer) decide(ctx context.Context, token string) (decision, bool, error) {
	key := sha256.Sum256([]byte(token))
	if d, ok := a.cached(key); ok {
		return d, false, nil
	}
	if err := a.acquire(ctx); err != nil {
		return decision{}, false, err
	}
	defer func() { <-a.slots }()
	// A request with the same token may have been reviewed while this one
	// waited for its slot.
	if d, ok := a.cached(key); ok {
		return d, false, nil
	}
	d, err := a.review(ctx, token)
	if err != nil {
		return decision{}, false, err
	}
	ttl := a.opts.DenyTTL
	if d.verdict == allow {
		ttl = a.opts.AllowTTL
	}
	// From the start of the reviews, not their end: a slow answer must not
	// stretch how long a token revoked meanwhile still gets in.
	d.expires = d.reviewed.Add(ttl)
	a.remember(key, d)
	return d, true, nil
}

// cached returns the unexpired decision for key, if there is one.
func (a *Authorizer) cached(key [sha256.Size]byte) (decision, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.opts.Clock.Now()
	for _, c := range []*lru.Cache{a.allowed, a.refused} {
		v, ok := c.Get(key)
		if !ok {
			continue
		}
		if d := v.(decision); now.Before(d.expires) {
			return d, true
		}
		c.Remove(key)
	}
	return decision{}, false
}

// remember caches d for key, unless a later review's decision is cached
// already. Requests with one token that find no decision are reviewed at
// once, each in its own slot; the review that answers last need not be the
// one that saw the API server's latest state, and a slow permission must not
// replace a refusal reviewed after the right was removed.
func (a *Authorizer) remember(key [sha256.Size]byte, d decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	into, other := a.allowed, a.refused
	if d.verdict != allow {
		into, other = a.refused, a.allowed
	}
	for _, c := range []*lru.Cache{into, other} {
		if v, ok := c.Get(key); ok && v.(decision).reviewed.After(d.reviewed) {
			return
		}
	}
	// The other cache may hold an earlier review's decision: left there, a
	// permission would outlive the refusal that replaced it, since cached
	// looks at permissions first.
	other.Remove(key)
	into.Add(key, d)
}

// acquire takes a review slot, waiting up to QueueWait for one. A request
// past that is refused rather than queued: a flood of new tokens must cost
// the API server at most MaxReviews requests at a time, and the operator a
// goroutine per open request, no more.
func (a *Authorizer) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	timer := a.opts.Clock.NewTimer(a.opts.QueueWait)
	defer timer.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-timer.C():
		return &reviewError{status: http.StatusServiceUnavailable,
			err: fmt.Errorf("%d token reviews already in flight for %s", cap(a.slots), a.opts.QueueWait)}
	case <-ctx.Done():
		return &reviewError{status: http.StatusServiceUnavailable, err: fmt.Errorf("wait for a token review: %w", ctx.Err())}
	}
}

// review asks the API server who token is (TokenReview), then whether
// that identity may get the path (SubjectAccessReview).
func (a *Authorizer) review(ctx context.Context, token string) (decision, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.ReviewTimeout)
	defer cancel()
	// client-go logs request bodies, the token's included, at verbosity 8
	// and more, with the logger of the request's context: none here.
	ctx = klog.NewContext(ctx, logr.Discard())
	reviewed := a.opts.Clock.Now()
	// No audiences: the API server checks the token against its own, as it
	// does for a request made with it, so a ServiceAccount token that can
	// call the API server can scrape.
	tr, err := a.opts.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, failed("create a TokenReview", err)
	}
	if !tr.Status.Authenticated {
		return decision{verdict: unauthenticated, reviewed: reviewed}, nil
	}
	user := tr.Status.User
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	sar, err := a.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: a.opts.Path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, failed(fmt.Sprintf("create a SubjectAccessReview for user %q", user.Username), err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return decision{verdict: forbidden, user: user.Username, reviewed: reviewed}, nil
	}
	return decision{verdict: allow, user: user.Username, reviewed: reviewed}, nil
}

// failed classifies a review the API server did not answer. Refused to the
// operator itself, it is a fault of the operator's install (403: its
// ClusterRole lacks the reviews) or of its own credentials (401), which no
// retry of the scraper mends: 500. Anything else may pass: 503.
func failed(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return &reviewError{status: http.StatusInternalServerError,
			err: fmt.Errorf("%s: the operator may not (its ClusterRole needs create on tokenreviews and subjectaccessreviews): %w", what, err)}
	case apierrors.IsUnauthorized(err):
		return &reviewError{status: http.StatusInternalServerError,
			err: fmt.Errorf("%s: the API server does not accept the operator's own credentials: %w", what, err)}
	}
	return &reviewError{status: http.StatusServiceUnavailable, err: fmt.Errorf("%s: %w", what, err)}
}
