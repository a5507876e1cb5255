// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/wording"
)

// Guard limits where remote destinations may lead. A tenant chooses
// the server of a remote destination: without limits Vidra would carry
// requests, from inside the cluster, to any address it can reach.
type Guard struct {
	// AllowHTTP accepts servers named with http://, whose requests, bearer
	// tokens and manifests included, travel in clear text.
	AllowHTTP bool
	// DenyCIDRs are the address ranges no remote destination may connect
	// to, checked on the address a server's name resolves to when it is
	// dialled. Nil means DefaultDenyCIDRs; an empty slice denies nothing.
	DenyCIDRs []netip.Prefix
	// SlowAnswer is how long a remote server may take to answer a request
	// a reconcile waits for before Vidra treats it as unavailable; zero
	// means DefaultSlowAnswer.
	SlowAnswer time.Duration
	// CacheObjects and CacheBytes bound the stubs the informers' caches
	// hold of the remote clusters of one namespace together (objects held
	// in full are charged to their owners' namespaces instead); zero means
	// DefaultCacheObjects and DefaultCacheBytes.
	CacheObjects, CacheBytes int64
}

// The default budget of the stubs the caches of one namespace's remote
// clusters hold: the objects with Vidra's marks that no resource of the
// namespace deploying there declares (internal/cachecharge), which no
// tenant's byte budget pays for. A remote cluster may be a server of the
// tenant's own, which can send any number of objects with the right
// labels, of any number of kinds: the operator holds a stub of each, some
// 600 bytes as counted and about 1 KiB of heap (50,000 held 53 MiB in
// TestRemoteClusterCannotFillTheOperatorsCaches). A shared cluster shows each namespace's informers the marked
// objects of every tenant on it, so the number is well above what one
// tenant labels there (the 10,001 of issue 49 cost another tenant
// nothing), and 32 MiB holds it. docs/security.md adds up what else a
// namespace of hostile clusters can cost.
const (
	DefaultCacheObjects = 30_000
	DefaultCacheBytes   = 32 << 20
)

// LocalStubObjects bounds the stubs the caches of the local cluster hold
// (see DefaultCacheObjects): objects with Vidra's marks that no resource
// declares, which any tenant may create in its namespace. Past it the
// local informers stop for a hold, as a remote cluster's do; a count quota
// on the tenants' namespaces keeps far below it.
const LocalStubObjects = 30_000

// DefaultDenyCIDRs are the link-local ranges, where clouds serve instance
// metadata and credentials (169.254.169.254, fd00:ec2::254 aside). Loopback
// stays allowed: a remote destination on the operator's own host is a test
// setup, not an attack on a neighbour.
func DefaultDenyCIDRs() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}
}

// ParseCIDRs parses a comma-separated list of CIDRs, as
// --destination-cidr-deny takes them; an empty string is an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// remoteGuard applies a Guard to the clients of remote destinations.
type remoteGuard struct {
	allowHTTP bool
	deny      []netip.Prefix
	slow      time.Duration
	dialer    *net.Dialer
	resolver  *net.Resolver
	// requests, informers and discovery bound the answers of the request
	// clients, of the informers' clients and of the discovery client;
	// tests make them small.
	requests, informers, discovery answerLimits
	// cacheObjects and cacheBytes bound the caches of one namespace's
	// remote clusters.
	cacheObjects, cacheBytes int64

	mu sync.Mutex
	// slots are the list slots of the namespaces (see listSlot), pools
	// their watch pools (see watchPool).
	slots map[string]*listSlot
	pools map[string]*namespacePool
	// discoveryPools are the discovery pools of the namespaces.
	discoveryPools map[string]*namespacePool
	// poolBytes bounds each watch pool, discoveryValues each discovery
	// pool, eventRate and eventBurst the events of each watch pool; tests
	// make them small.
	poolBytes, discoveryValues int64
	eventRate                  rate.Limit
	eventBurst                 int
	// pause waits for d, or until stop or cancel is closed, and reports
	// whether it waited it out: a watch stream read faster than its pool's
	// events allow waits in it. now is the time the pace is reckoned by.
	// Tests record the waits instead, and stop the clock.
	pause func(d time.Duration, stop, cancel <-chan struct{}) bool
	now   func() time.Time
}

func newRemoteGuard(g Guard) (*remoteGuard, error) {
	deny := g.DenyCIDRs
	if deny == nil {
		deny = DefaultDenyCIDRs()
	}
	for _, p := range deny {
		if !p.IsValid() {
			return nil, fmt.Errorf("destination CIDR deny list: invalid prefix %v", p)
		}
	}
	if g.CacheObjects <= 0 {
		g.CacheObjects = DefaultCacheObjects
	}
	if g.CacheBytes <= 0 {
		g.CacheBytes = DefaultCacheBytes
	}
	return &remoteGuard{
		cacheObjects: g.CacheObjects,
		cacheBytes:   g.CacheBytes,
		allowHTTP:    g.AllowHTTP,
		deny:         deny,
		slow:         g.SlowAnswer,
		// The timeouts of client-go's own dialer.
		dialer:   &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		resolver: net.DefaultResolver,
		requests: answerLimits{answer: maxAnswerBytes, values: maxAnswerValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes, aboutObjects: true},
		informers: answerLimits{answer: maxListBytes, values: maxListValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes,
			lists: true, timeout: informerRequestTimeout},
		discovery: answerLimits{answer: maxAnswerBytes, values: maxDiscoveryValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes, discovery: true},
		poolBytes:       maxWatchPoolBytes,
		discoveryValues: maxDiscoveryValuesPerNamespace,
		eventRate:       watchEventRate,
		eventBurst:      watchEventBurst,
		pause:           pause,
		now:             time.Now,
	}, nil
}

// pause waits for d, or until stop or cancel is closed, and reports whether
// it waited it out.
func pause(d time.Duration, stop, cancel <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-cancel:
		return false
	}
}

// checkServer refuses a server URL the guard does not allow before any
// connection is made.
func (g *remoteGuard) checkServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !g.allowHTTP {
			return fmt.Errorf("server %s is plain http, which would send credentials and manifests in clear text; use https (or run the operator with --allow-http-destinations)", server)
		}
	default:
		return fmt.Errorf("server %q: scheme %q is not https", server, u.Scheme)
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if p, denied := g.denied(a); denied {
			return &deniedAddressError{host: u.Hostname(), addr: a, prefix: p}
		}
	}
	return nil
}

// deniedAddressError says that a server resolves to an address of
// --destination-cidr-deny.
type deniedAddressError struct {
	host   string
	addr   netip.Addr
	prefix netip.Prefix
}

func (e *deniedAddressError) Error() string {
	if e.host == e.addr.String() {
		return fmt.Sprintf("address %s is in %s, which remote destinations may not reach (--destination-cidr-deny)", e.addr, e.prefix)
	}
	return fmt.Sprintf("%s resolves to %s, in %s, which remote destinations may not reach (--destination-cidr-deny)", e.host, e.addr, e.prefix)
}

func (g *remoteGuard) denied(a netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, p := range g.deny {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// dial is the DialContext of remote clients. It resolves the host itself and
// connects to a checked address, never to the name: a name that resolves to
// an allowed address when checked and to a denied one when dialled (DNS
// rebinding) cannot slip through.
func (g *remoteGuard) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		if p, denied := g.denied(ip); denied {
			errs = append(errs, &deniedAddressError{host: host, addr: ip.Unmap(), prefix: p})
			continue
		}
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}

// noProxy keeps remote destinations off any proxy of the operator's
// environment (HTTPS_PROXY): behind a proxy the address checked would be
// the proxy's, and the proxy would reach denied ranges on Vidra's behalf.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// The limits of what remote clients read of one answer. A tenant chooses the
// server, which may be their own: without them, one 200 MiB answer read whole
// took the heap to 2.5 GiB, ten times the operator's memory limit. An answer
// over its limit fails the request and opens the server's circuit breaker:
// a server that sends them is not one to keep reading from. An answer over
// a bound that depends on what Vidra asked for or already holds (an answer
// about an object, discovery over its namespace's pool) fails its request
// only (see refusedAnswer).
const (
	// maxAnswerBytes bounds an answer of the request clients: one object
	// (etcd refuses objects over 1.5 MiB by default, about 3 MiB as JSON at
	// most) or one discovery document (aggregated discovery of a cluster
	// with 2,500 CRDs is about 1.5 MiB). Each worker may be reading one, and
	// an answer is held two or three times over while it is decoded.
	maxAnswerBytes = 8 << 20
	// maxAnswerValues bounds the JSON values of an answer of the request
	// clients, and maxListValues those of a list, its pages together.
	// Decoded into Go maps and slices, a value costs up to 170 bytes
	// however short its text: 64 MiB of tiny values once decoded into
	// 1 GiB. 100,000 values decode into 17 MiB at most, and each worker may
	// be decoding one answer: one object (a ConfigMap is 20 to 60 values, a
	// Deployment as served about 200, etcd's largest CustomResourceDefinition
	// some 75,000) or one discovery document. 250,000 values, 42 MiB at
	// most, hold some 5,000 ConfigMaps or 1,200 Deployments, and the
	// informers of a namespace's clusters read one list at a time.
	maxAnswerValues = 100_000
	maxListValues   = 250_000
	// maxDiscoveryValues bounds a discovery document: 150,000 values
	// describe some 5,000 resources. It decodes into fixed structs, in
	// which an empty object of the text costs up to 290 bytes: 42 MiB at
	// most.
	maxDiscoveryValues = 150_000
	// maxListBytes bounds what the informers' clients read of one list, its
	// pages together: the objects of one kind that carry Vidra's labels on
	// one cluster. With maxListValues it holds some 5,000 ConfigMaps or
	// 1,200 Deployments; larger sets are more than one operator should
	// cache from a cluster it does not run in.
	maxListBytes = 16 << 20
	// maxEventBytes and maxEventValues bound one event of a watch stream,
	// which holds one object: etcd's largest is about 3 MiB as JSON.
	maxEventBytes  = 4 << 20
	maxEventValues = 100_000
	// retainedEventBytes is the largest event after which a watch stream
	// goes on. client-go's decoders keep buffers of about twice the largest
	// event a stream carried for as long as it lasts: twenty watches that
	// each carried one 3.9 MiB event held 174 MiB, and a server can send
	// events that cache nothing (a delete of a name it never sent). After a
	// larger event the stream ends, cleanly, and its buffers go with it;
	// the informer watches again from that event on.
	retainedEventBytes = 64 << 10
	// maxWatchPoolBytes bounds the bytes the watch streams of one
	// namespace's remote clusters hold at once: the event each is reading,
	// the largest each keeps a buffer for, and watchStreamBytes each. A
	// server can trickle an event, and a tenant chooses how many kinds its
	// clusters watch. client-go's buffers take up to about twice the count.
	maxWatchPoolBytes = 16 << 20
	// watchEventRate and watchEventBurst bound how fast the watch streams
	// of one namespace's remote clusters are read, in events per second:
	// an event counts one, and one more for every eventUnitBytes of its
	// text, since decoding costs by the byte. One tenant's server streaming
	// 42,000 small events a second into one watch took 1.4 of the
	// operator's cores from every other tenant. A namespace's clusters get
	// 1,000 a second, 10,000 at once: a thousand Deployments of some 5 KiB
	// each, rolling out together, send fewer. Past that a stream is read
	// no faster, and the server's writes wait on the connection.
	watchEventRate  = 1000
	watchEventBurst = 10_000
	eventUnitBytes  = 1 << 10
	// watchStreamBytes is what an open watch stream is counted for in its
	// namespace's pool besides its events: its decoders, goroutines and
	// HTTP/2 stream. With maxWatchPoolBytes, at most 1,024 watches of one
	// namespace's remote clusters are open at once.
	watchStreamBytes = 16 << 10
	// maxDiscoveryValuesPerNamespace bounds the JSON values of the
	// discovery documents the RESTMappers of one namespace's remote
	// clusters hold together, each cluster counted by the latest answer for
	// each discovery path. A mapper keeps every resource a cluster serves,
	// some 2 KiB each once mapped: five clusters of a tenant's server, each
	// serving 28,000 resources in 140,000 values, held 309 MiB. 150,000
	// values are two clusters of 2,500 CRDs each.
	maxDiscoveryValuesPerNamespace = 150_000
	// informerRequestTimeout bounds the requests of the informers' clients
	// that are not watches (their lists): those clients have no timeout, as
	// a watch is one long request, and a list trickling in must not hold
	// its informer forever.
	informerRequestTimeout = 2 * time.Minute
)

// answerLimits bounds what one client reads of a server's answers.
type answerLimits struct {
	// answer and values bound a successful answer that is not a watch's, in
	// bytes and in JSON values; error answers are cut at maxErrorBody.
	answer, values int64
	// event and eventValues bound one event of a watch stream; a stream
	// ends after an event over retain (see retainedEventBytes).
	event, eventValues, retain int64
	// aboutObjects bounds answers about an object by the object (see
	// AnswersAbout).
	aboutObjects bool
	// discovery says that the answers are discovery documents, whatever
	// their path (a server's URL may have one, and a redirect leads
	// anywhere): the RESTMapper keeps them.
	discovery bool
	// lists says that the answers are lists, whose pages (requests with a
	// continue token) are bounded together, as one answer: client-go's
	// pager holds them all before anything reads them.
	lists bool
	// timeout bounds a request that is not a watch, 0 for none (the
	// client's own timeout applies).
	timeout time.Duration
}

// answerTooLargeError says that a server sent more than Vidra reads of one
// answer, list or watch event: limit bytes, or values JSON values.
type answerTooLargeError struct {
	server string
	what   string
	limit  int64
	values int64
	// hint says what else the answer may mean.
	hint string
	// about says that the limit was the bound of an answer about an object
	// (AnswersAbout): a refusal of the request (see refusedAnswer).
	about bool
}

func (e *answerTooLargeError) Error() string {
	over := byteSize(e.limit)
	if e.values > 0 {
		over = fmt.Sprintf("%d JSON values", e.values)
	}
	msg := fmt.Sprintf("the API server at %s sent %s over %s, more than Vidra reads from a remote cluster; is destination.server a Kubernetes API server?",
		e.server, e.what, over)
	if e.hint != "" {
		msg += " " + e.hint
	}
	return msg
}

// byteSize writes a limit as people read it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// wrapAnswers is a rest.Config WrapTransport for remote clients: answers
// that are not a Kubernetes API server's are replaced before client-go
// reads them. client-go copies a text body into its error, and a JSON body
// without a kind into its decoding error, and those errors end in status
// conditions and Events, which tenants read: any server Vidra can reach
// would otherwise answer the tenant through them. Answers and watch events
// over limits fail; failed, if not nil, is told of a watch event over its
// limit, found after the request succeeded (the circuit breaker's fail).
// Watch streams are counted in pool, discovery documents in discovery, when
// not nil.
func (g *remoteGuard) wrapAnswers(server string, limits answerLimits, failed func(error), pool *namespacePool, discovery *discoveryAccount) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &answerGuard{server: server, allowHTTP: g.allowHTTP, limits: limits, failed: failed, pool: pool, discovery: discovery, pause: g.pause, now: g.now, next: rt, lists: map[string]listRead{}}
	}
}

// discoveryAccount returns a new account, in the discovery pool of
// namespace, for the discovery documents of one remote cluster.
func (g *remoteGuard) discoveryAccount(namespace string) *discoveryAccount {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := perNamespace(&g.discoveryPools, namespace, func() *namespacePool { return &namespacePool{namespace: namespace, max: g.discoveryValues} })
	return &discoveryAccount{pool: p, paths: map[string]int64{}}
}

// discoveryAccount is one cluster's share of its namespace's discovery
// pool: the values of the latest answer for each discovery path, which is
// what its mapper holds. It is closed when the cluster's clients are
// dropped.
type discoveryAccount struct {
	pool *namespacePool

	mu     sync.Mutex
	paths  map[string]int64
	closed bool
	// refused is the last refusal, until heldUntil: the cluster's discovery
	// is not asked again before, since the RESTMapper would ask for it on
	// every mapping and get it refused again.
	refused   error
	heldUntil time.Time
}

// discoveryRefusalHold is how long a cluster whose discovery document was
// refused is not asked for discovery again.
const discoveryRefusalHold = 30 * time.Second

// refuse records a refusal of the cluster's discovery.
func (a *discoveryAccount) refuse(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused, a.heldUntil = err, time.Now().Add(discoveryRefusalHold)
}

// held returns the last refusal while its hold lasts, nil otherwise.
func (a *discoveryAccount) held() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil || !time.Now().Before(a.heldUntil) {
		return nil
	}
	return a.refused
}

// charge counts an answer of values for path, in place of the path's
// previous one, and reports whether the pool had room for it.
func (a *discoveryAccount) charge(path string, values int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return true
	}
	if !a.pool.resize(a.paths[path], values) {
		return false
	}
	a.paths[path] = values
	return true
}

// close gives what the account holds back to the pool.
func (a *discoveryAccount) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	var held int64
	for _, v := range a.paths {
		held += v
	}
	a.pool.resize(held, 0)
	a.paths = nil
}

// discoveryPoolError says that a namespace's remote clusters would hold
// more discovery than their pool.
type discoveryPoolError struct {
	server, namespace string
	values, max       int64
}

func (e *discoveryPoolError) Error() string {
	return fmt.Sprintf("the API server at %s sent discovery documents that would make the remote clusters of namespace %s hold more than %d JSON values of them (this one has %d), the most Vidra holds for one namespace; is destination.server a Kubernetes API server? "+
		"If it is, the namespace's resources name more clusters, or clusters with more resource types, than Vidra serves one namespace: a cluster with 2,500 CustomResourceDefinitions takes about half of it",
		e.server, e.namespace, e.max, e.values)
}

// watchPool returns the watch pool of namespace's remote clusters.
func (g *remoteGuard) watchPool(namespace string) *namespacePool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return perNamespace(&g.pools, namespace, func() *namespacePool {
		return &namespacePool{namespace: namespace, max: g.poolBytes, events: rate.NewLimiter(g.eventRate, g.eventBurst)}
	})
}

// namespacePool counts what the remote clusters of one namespace hold of
// one thing, against a bound: the bytes of their watch streams (see
// maxWatchPoolBytes), or the JSON values of their discovery documents (see
// maxDiscoveryValuesPerNamespace). A tenant names as many clusters, and
// kinds, as it likes: only a bound per namespace bounds anything.
type namespacePool struct {
	namespace string
	max       int64
	// events paces the events of a watch pool's streams (see
	// watchEventRate); nil for a discovery pool.
	events *rate.Limiter

	mu   sync.Mutex
	used int64
	// slowedAt is when a stream of the pool was last logged as slowed.
	slowedAt time.Time
}

// slowedLogEvery spaces the log lines that say a namespace's watches are
// read more slowly than their servers send.
const slowedLogEvery = time.Minute

// slowed reports whether a slowed stream of the pool is to be logged: at
// most once every slowedLogEvery.
func (p *namespacePool) slowed(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.slowedAt) < slowedLogEvery {
		return false
	}
	p.slowedAt = now
	return true
}

// resize changes what one holder counts from from to to, and reports
// whether the pool has room for it; shrinking always does.
func (p *namespacePool) resize(from, to int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to > from && p.used+to-from > p.max {
		return false
	}
	p.used += to - from
	return true
}

// inUse returns what the pool counts now.
func (p *namespacePool) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// watchPoolError says that a namespace's watch streams would hold more than
// their pool.
type watchPoolError struct {
	server, namespace string
	max               int64
}

func (e *watchPoolError) Error() string {
	return fmt.Sprintf("the watches of the remote clusters of namespace %s would hold more than %s of watch events at once, the most Vidra holds for one namespace; Vidra ended the watch of the API server at %s. "+
		"Is destination.server a Kubernetes API server? If it is, its objects with Vidra's labels change in large numbers, or are very large: keep fewer or smaller objects with Vidra's labels, or fewer kinds, on the namespace's remote clusters",
		e.namespace, byteSize(e.max), e.server)
}

// listSlot returns the slot of namespace's informers (see listsOnly). A
// list is bounded, but a tenant chooses how many kinds its clusters list,
// and each list is held whole, decoded, before it is cached.
func (g *remoteGuard) listSlot(namespace string) *listSlot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return perNamespace(&g.slots, namespace, func() *listSlot { return &listSlot{held: make(chan struct{}, 1)} })
}

// perNamespace returns (*m)[namespace], made by mk the first time. The
// guard's lock is held.
func perNamespace[T any](m *map[string]T, namespace string, mk func() T) T {
	if *m == nil {
		*m = map[string]T{}
	}
	v, ok := (*m)[namespace]
	if !ok {
		v = mk()
		(*m)[namespace] = v
	}
	return v
}

type answerGuard struct {
	server string
	// allowHTTP lets requests go over plain http: every hop of a redirect
	// passes here, and is held to the rule its server was.
	allowHTTP bool
	limits    answerLimits
	failed    func(error)
	pool      *namespacePool
	// discovery counts the discovery documents of the cluster.
	discovery *discoveryAccount
	pause     func(d time.Duration, stop, cancel <-chan struct{}) bool
	now       func() time.Time
	next      http.RoundTripper

	mu sync.Mutex
	// lists holds what was read of each list, by path and selectors, for
	// limits.lists: the pages of a list add up.
	lists map[string]listRead
}

// listRead is what was read of a list's pages so far.
type listRead struct{ bytes, values int64 }

// maxErrorBody bounds what is read of an error answer to check it: a
// Kubernetes Status is a few hundred bytes.
const maxErrorBody = 64 << 10

func (t *answerGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	// The server was checked to be https; a redirect it answers is followed
	// by the HTTP client through here, and would otherwise take the
	// request, its manifest and the kubeconfig's credentials, in clear
	// text, to any plain-http service the operator can reach.
	if !t.allowHTTP && !strings.EqualFold(req.URL.Scheme, "https") {
		return nil, fmt.Errorf("%s redirected a request to %s, which is not https: Vidra sends credentials and manifests over https only (--allow-http-destinations allows http)", t.server, req.URL.Redacted())
	}
	watch := isWatch(req)
	if t.limits.timeout > 0 && !watch {
		// Every answer but a watch's is read whole below, before the
		// deadline is let go.
		ctx, cancel := context.WithTimeout(req.Context(), t.limits.timeout)
		defer cancel()
		req = req.WithContext(ctx)
	}
	if t.discovery != nil && t.limits.discovery {
		if err := t.discovery.held(); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(jsonOnly(req))
	if err != nil || resp == nil {
		return resp, err
	}
	verdict, body, rerr := t.kubernetesAnswer(req, resp)
	switch {
	case rerr != nil:
		resp.Body.Close()
		var tooLarge *answerTooLargeError
		if errors.As(rerr, &tooLarge) {
			klog.FromContext(req.Context()).V(2).Info("Refused an answer over its limit",
				"server", t.server, "path", req.URL.Path, "code", resp.StatusCode, "limit", tooLarge.limit, "values", tooLarge.values)
			return nil, rerr
		}
		var pool *discoveryPoolError
		if errors.As(rerr, &pool) {
			klog.FromContext(req.Context()).V(2).Info("Refused a discovery document over the namespace's pool",
				"server", t.server, "path", req.URL.Path, "namespace", pool.namespace, "values", pool.values, "max", pool.max)
			return nil, rerr
		}
		return nil, fmt.Errorf("read the answer of %s: %w", t.server, rerr)
	case verdict == answerStream:
		b := &eventLimitBody{body: resp.Body, guard: t, done: make(chan struct{}), cancel: req.Context().Done(), log: klog.FromContext(req.Context())}
		if !b.resize(watchStreamBytes) {
			resp.Body.Close()
			err := t.poolFull()
			if t.failed != nil {
				t.failed(err)
			}
			return nil, &refusedWatch{err: err}
		}
		resp.Body = b
		return resp, nil
	case verdict == answerKubernetes:
		if body != nil {
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
		return resp, nil
	}
	resp.Body.Close()
	klog.FromContext(req.Context()).V(2).Info("Replaced an answer that is not a Kubernetes API server's",
		"server", t.server, "path", req.URL.Path, "code", resp.StatusCode, "contentType", resp.Header.Get("Content-Type"))
	return foreignAnswer(req, resp, t.server), nil
}

// countValues bounds the JSON values of an answer read whole (of the list
// its pages make up, for lists), and returns the answer's own.
func (t *answerGuard) countValues(req *http.Request, body []byte, bound answerBound) (int64, error) {
	var scan jsonScan
	for _, c := range body {
		scan.feed(c)
	}
	read := listRead{bytes: int64(len(body)), values: scan.values}
	if bound.list {
		q := req.URL.Query()
		key := req.URL.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector")
		t.mu.Lock()
		if q.Get("continue") != "" {
			prev := t.lists[key]
			read.bytes += prev.bytes
			read.values += prev.values
		}
		t.lists[key] = read
		t.mu.Unlock()
	}
	switch {
	case read.values > bound.values:
		return 0, bound.tooLarge(t, 0, bound.values)
	case read.bytes > bound.bytes:
		return 0, bound.tooLarge(t, bound.bytes, 0)
	}
	return scan.values, nil
}

// answerBound is what one successful answer may hold: bytes of text and
// JSON values, and what the answer is, for its error.
type answerBound struct {
	what          string
	bytes, values int64
	// list says that the answer is a page of a list (see answerLimits.lists).
	list bool
	// about is the object the request concerns (see AnswersAbout).
	about *answersAbout
}

// The part of the bound of an answer about an object (see AnswersAbout)
// that does not grow with the object: room for what an API server adds to
// any object (defaults, managedFields, a status, what admission webhooks
// inject, fields others set that spec.ignore leaves them).
const (
	answerAboutBytes  = 1 << 20
	answerAboutValues = 20_000
)

// boundOf returns the bound of the answer to req. Discovery documents are
// the largest answers of a cluster with thousands of CRDs, about 30 values
// a resource: told by the client that asks, or the path asked for, never
// by the kind the server names. An answer about an object Vidra declares
// is bounded in proportion to it.
func (t *answerGuard) boundOf(req *http.Request) answerBound {
	b := answerBound{what: "an answer", bytes: t.limits.answer, values: t.limits.values}
	switch {
	case t.limits.lists && req.Method == http.MethodGet:
		b.what, b.list = "a list", true
	case t.limits.discovery || isDiscoveryPath(req):
		b.values = max(b.values, maxDiscoveryValues)
	default:
		about, _ := req.Context().Value(answersAboutKey{}).(*answersAbout)
		if about == nil || !t.limits.aboutObjects {
			break
		}
		// An API server's answer about an object holds the object, its
		// managedFields (about as many values again, in fewer bytes), its
		// defaults and its status: four times the object and the fixed
		// room above hold every answer of a real server measured.
		size := about.sizeOf()
		b.about = about
		b.bytes = min(b.bytes, (answerAboutBytes+4*size+1<<10-1)&^(1<<10-1))
		b.values = min(b.values, answerAboutValues+size)
	}
	return b
}

// poolFull is the error of a watch stream its namespace's pool has no room
// for.
func (t *answerGuard) poolFull() error {
	return &watchPoolError{server: t.server, namespace: t.pool.namespace, max: t.pool.max}
}

// tooLarge is the error of a watch event over limit bytes or values.
func (t *answerGuard) tooLarge(what string, limit, values int64) error {
	return answerBound{what: what}.tooLarge(t, limit, values)
}

// tooLarge is the error of an answer over limit bytes or values.
func (b answerBound) tooLarge(t *answerGuard, limit, values int64) error {
	e := &answerTooLargeError{server: t.server, what: b.what, limit: limit, values: values}
	switch {
	case b.list:
		e.hint = fmt.Sprintf("If it is, it holds more objects of one kind with Vidra's labels than Vidra caches from a remote cluster: %s or %d JSON values in one list, its pages together",
			byteSize(t.limits.answer), t.limits.values)
	case b.about != nil:
		e.what, e.about = "an answer about "+b.about.what(), true
		e.hint = fmt.Sprintf("If it is, the object has grown far beyond its manifest (%d bytes as Vidra sends it): an answer about an object of a manifest may hold 1 MiB more than four times the object, and %d JSON values more than its bytes",
			b.about.sizeOf(), answerAboutValues)
	}
	return e
}

// answersAboutKey is the context key of AnswersAbout.
type answersAboutKey struct{}

// answersAbout is the object requests concern, and its size as Vidra
// sends it, measured when an answer first needs it: most reconciles send
// nothing.
type answersAbout struct {
	obj  *unstructured.Unstructured
	once sync.Once
	size int64
}

func (a *answersAbout) sizeOf() int64 {
	a.once.Do(func() {
		if a.size > 0 {
			return
		}
		if sent, err := a.obj.MarshalJSON(); err == nil {
			a.size = int64(len(sent))
		}
	})
	return a.size
}

// what names the object as messages do.
func (a *answersAbout) what() string {
	if ns := a.obj.GetNamespace(); ns != "" {
		return a.obj.GetKind() + " " + ns + "/" + a.obj.GetName()
	}
	return a.obj.GetKind() + " " + a.obj.GetName()
}

// AnswersAbout tells the clients of a remote cluster that the requests made
// with the returned context concern obj, as its manifest declares it, and
// that what Vidra sends of it is at most size bytes (0: obj's JSON). Their
// answers may hold at most 1 MiB more than four times that, and 20,000
// JSON values more than its bytes, rather than the 8 MiB and 100,000 values
// of any answer: a tenant's own server answers with as much as Vidra reads,
// and each worker may be holding an answer (at 8 MiB, four of them took
// the heap 95 to 131 MiB up). Clients of the local cluster ignore it.
func AnswersAbout(ctx context.Context, obj *unstructured.Unstructured, size int64) context.Context {
	return context.WithValue(ctx, answersAboutKey{}, &answersAbout{obj: obj, size: size})
}

// RefusedAnswer returns the error in err's chain that refused one answer of
// a remote cluster for what it would make Vidra hold (see refusedAnswer),
// or nil.
func RefusedAnswer(err error) error {
	var tooLarge *answerTooLargeError
	var pool *discoveryPoolError
	switch {
	case errors.As(err, &tooLarge) && tooLarge.about:
		return tooLarge
	case errors.As(err, &pool):
		return pool
	}
	return nil
}

// refusedAnswer reports an error that refuses one answer for what it would
// make Vidra hold, not for what it says of its server: an answer about an
// object over the object's bound, or discovery over its namespace's pool.
// It fails the request, not the server: the server's breaker stays closed,
// and the other requests to it go on.
func refusedAnswer(err error) bool { return RefusedAnswer(err) != nil }

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *answerGuard) WrappedRoundTripper() http.RoundTripper { return t.next }

// answerVerdict is what kubernetesAnswer makes of an answer.
type answerVerdict int

const (
	// answerForeign is not a Kubernetes API server's answer.
	answerForeign answerVerdict = iota
	// answerKubernetes is, and was read whole if it has a body.
	answerKubernetes
	// answerStream is a watch's stream, read as it comes.
	answerStream
)

// kubernetesAnswer tells whether resp looks like an answer of a Kubernetes
// API server: JSON, an error in a Status, an object that names
// its kind. It reads every answer but a watch's whole, within the limits,
// and returns what it read, for the caller to put back.
func (t *answerGuard) kubernetesAnswer(req *http.Request, resp *http.Response) (answerVerdict, []byte, error) {
	if followed(resp) || resp.StatusCode == http.StatusNotModified {
		// Followed by the HTTP client, whose next request comes through
		// here; a 304 has no body, whatever the server sends. Any other
		// 3xx is handed back to client-go, which reads its body: it is
		// read below as an error answer.
		return answerKubernetes, nil, nil
	}
	media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || media != "application/json" {
		// Protobuf too: only JSON is asked for (see jsonOnly). Protobuf
		// decodes into typed objects in which two bytes of text (an
		// empty repeated message) cost a hundred: no count of the text
		// bounds them.
		return answerForeign, nil, nil
	}
	if isWatch(req) {
		// A watch answers with a stream that never ends, which must not be
		// read here; its decoding errors reach the log, never a status.
		return answerStream, nil, nil
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	var body []byte
	bound := t.boundOf(req)
	if ok2xx {
		limit := bound.bytes
		if resp.ContentLength > limit {
			return answerForeign, nil, bound.tooLarge(t, limit, 0)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1)); err != nil {
			return answerForeign, nil, err
		}
		if int64(len(body)) > limit {
			return answerForeign, nil, bound.tooLarge(t, limit, 0)
		}
	} else {
		// An error answer is the server's say on one request, not a
		// failure of the server: one too long to be a Status is cut, and
		// then fails the checks below.
		if body, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)); err != nil {
			return answerForeign, nil, err
		}
	}
	if ok2xx && req.URL.Path == "/version" {
		// Decoded into a fixed struct: unknown fields are dropped, nothing
		// of the body reaches an error.
		return answerKubernetes, body, nil
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil || tm.Kind == "" {
		return answerForeign, nil, nil
	}
	switch {
	case !ok2xx && (tm.Kind != "Status" || tm.APIVersion != "v1"):
		return answerForeign, nil, nil
	case tm.APIVersion == "" && !isDiscoveryKind(tm.Kind):
		// The dynamic client's decoder quotes an object without apiVersion.
		return answerForeign, nil, nil
	}
	if ok2xx {
		values, err := t.countValues(req, body, bound)
		if err != nil {
			return answerForeign, nil, err
		}
		if t.discovery != nil && t.limits.discovery && !t.discovery.charge(req.URL.Path, values) {
			err := &discoveryPoolError{server: t.server, namespace: t.discovery.pool.namespace, values: values, max: t.discovery.pool.max}
			t.discovery.refuse(err)
			return answerForeign, nil, err
		}
	}
	if !ok2xx {
		body = boundStatus(body)
	}
	return answerKubernetes, body, nil
}

// A remote server's Status may say up to maxErrorBody, and each of a
// reconcile's requests may fail with one: a thousand objects refused with
// 64 KiB each made a reconcile hold 64 MiB of the tenant's text, a log line
// as long, and Events of it. Its message is kept to maxStatusMessage, and
// at most maxStatusCauses of its causes, each cut to maxCauseMessage: what
// a person reads of a refusal is its start.
const (
	maxStatusMessage = 1024
	maxStatusCauses  = 8
	maxCauseMessage  = 256
)

// boundStatus returns the Status in body with its text bounded (see
// maxStatusMessage); body itself when it is within the bounds, or when it
// does not decode, which client-go's decoder then reports.
func boundStatus(body []byte) []byte {
	if len(body) <= maxStatusMessage {
		return body
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return body
	}
	st.Message = wording.Cut(st.Message, maxStatusMessage, "...")
	if d := st.Details; d != nil {
		d.Name = wording.Cut(d.Name, maxCauseMessage, "...")
		d.Kind = wording.Cut(d.Kind, maxCauseMessage, "...")
		d.Group = wording.Cut(d.Group, maxCauseMessage, "...")
		d.UID = types.UID(wording.Cut(string(d.UID), maxCauseMessage, "..."))
		d.Causes = d.Causes[:min(len(d.Causes), maxStatusCauses)]
		for i := range d.Causes {
			d.Causes[i].Message = wording.Cut(d.Causes[i].Message, maxCauseMessage, "...")
			d.Causes[i].Field = wording.Cut(d.Causes[i].Field, maxCauseMessage, "...")
			d.Causes[i].Type = metav1.CauseType(wording.Cut(string(d.Causes[i].Type), maxCauseMessage, "..."))
		}
	}
	st.Reason = metav1.StatusReason(wording.Cut(string(st.Reason), maxCauseMessage, "..."))
	st.Continue, st.SelfLink, st.ResourceVersion = "", "", ""
	out, err := json.Marshal(&st)
	if err != nil {
		return body
	}
	return out
}

// eventLimitBody ends a watch stream at an event over the guard's limits,
// before client-go's decoder buffers it: its JSON framer reads a whole
// value, however large, before it looks at it. It follows the framing as
// the bytes pass: the nesting of brackets outside strings (an event ends
// where it returns to the top level). It also ends the stream, cleanly,
// after an event over limits.retain, counts what the stream holds in its
// namespace's watch pool (see maxWatchPoolBytes), and reads no faster than
// the pool's events allow (see watchEventRate).
type eventLimitBody struct {
	body  io.ReadCloser
	guard *answerGuard
	err   error
	log   klog.Logger

	// due is when the stream may be read again, after the events it
	// delivered (see charge); unpaced counts the bytes it read since it
	// last paid for them.
	due     time.Time
	unpaced int64

	// n counts the bytes of the current event, scan its syntax and values.
	n    int64
	scan jsonScan
	// largest is the largest event the stream carried, for which client-go
	// keeps buffers; room is what the pool counts for the stream, as Read
	// last set it.
	largest, room int64

	// mu orders Close, which gives the stream's bytes back to the pool,
	// against Read taking more.
	mu     sync.Mutex
	closed bool
	pooled int64
	// done is closed by Close, cancel with the request's context: a Read
	// waiting for its due time leaves.
	done   chan struct{}
	cancel <-chan struct{}
}

// poolStep is the granularity of a stream's count in its pool, so that the
// pool's lock is not taken for every byte.
const poolStep = 4 << 10

func (b *eventLimitBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if wait := b.due.Sub(b.guard.now()); wait > 0 && !b.guard.pause(wait, b.done, b.cancel) {
		// Closed, or its request ended, while it waited: the watch was
		// stopped.
		b.err = io.EOF
		return 0, b.err
	}
	n, err := b.body.Read(p)
	for i := range n {
		ended, ferr := b.next(p[i])
		if ferr != nil {
			b.err = ferr
			if g := b.guard; g.failed != nil {
				g.failed(b.err)
			}
			return i, b.err
		}
		if ended {
			// The event is complete: client-go decodes it, then sees the
			// end of the stream, and watches again from there.
			b.err = io.EOF
			return i + 1, nil
		}
	}
	return n, err
}

// Close gives what the stream held back to the pool.
func (b *eventLimitBody) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
		if p := b.guard.pool; p != nil {
			p.resize(b.pooled, 0)
		}
		b.pooled = 0
	}
	b.mu.Unlock()
	return b.body.Close()
}

// resize sets what the pool counts for the stream, and reports whether the
// pool had room. A closed stream holds nothing, and takes nothing more.
func (b *eventLimitBody) resize(to int64) bool {
	p := b.guard.pool
	if p == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return true
	}
	if !p.resize(b.pooled, to) {
		return false
	}
	b.pooled, b.room = to, to
	return true
}

// next takes the next byte of the stream. It returns an error once the
// current event has passed a limit or its namespace's pool, and reports
// whether an event over limits.retain ended with it.
func (b *eventLimitBody) next(c byte) (bool, error) {
	g := b.guard
	b.n++
	ended := b.scan.feed(c)
	switch {
	case b.n > g.limits.event:
		return false, g.tooLarge("a watch event", g.limits.event, 0)
	case g.limits.eventValues > 0 && b.scan.values > g.limits.eventValues:
		return false, g.tooLarge("a watch event", 0, g.limits.eventValues)
	}
	if ended {
		// An event, or the white space between events, ended.
		size := b.n
		b.n, b.scan.values = 0, 0
		b.charge(size, !isSpace(c))
		if g.limits.retain > 0 && size > g.limits.retain {
			return true, nil
		}
		if size > b.largest {
			b.largest = size
		}
		if want := watchStreamBytes + b.largest; want < b.room {
			b.resize(want)
		}
		return false, nil
	}
	if g.pool != nil && watchStreamBytes+b.n > b.room && !b.resize(watchStreamBytes+b.n+poolStep) {
		return false, g.poolFull()
	}
	return false, nil
}

// charge pays, in the pool's events, for size bytes of the stream, which
// ended an event or white space, and sets when the stream may be read
// again. White space is paid for by the eventUnitBytes, as it comes: a
// server could send nothing else.
func (b *eventLimitBody) charge(size int64, event bool) {
	p := b.guard.pool
	if p == nil || p.events == nil {
		return
	}
	b.unpaced += size
	units := b.unpaced / eventUnitBytes
	if event {
		units++
	}
	if units == 0 {
		return
	}
	b.unpaced %= eventUnitBytes
	units = min(units, int64(p.events.Burst()))
	now := b.guard.now()
	wait := p.events.ReserveN(now, int(units)).DelayFrom(now)
	if wait <= 0 {
		return
	}
	if due := now.Add(wait); due.After(b.due) {
		b.due = due
	}
	if p.slowed(now) {
		b.log.Info("Slowed the watches of a namespace's remote clusters: their servers send more events than Vidra reads for one namespace",
			"namespace", p.namespace, "server", b.guard.server, "eventsPerSecond", float64(p.events.Limit()), "burst", p.events.Burst())
	}
}

// isSpace reports JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonScan follows JSON text a byte at a time, as far as bounding it needs:
// the nesting of brackets outside strings, and the values, counted as the
// brackets and commas that open them.
type jsonScan struct {
	depth             int
	inString, escaped bool
	values            int64
}

// feed takes the next byte and reports whether a value at the top level, or
// white space between two, ended with it.
func (s *jsonScan) feed(c byte) bool {
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
		s.values++
	case c == ',':
		s.values++
	case c == '}' || c == ']':
		s.depth = max(s.depth-1, 0)
	}
	return s.depth == 0 && !s.inString && (c == '}' || c == ']' || c == '"' || isSpace(c))
}

// isDiscoveryPath reports a request of discovery: /api, /apis, /api/<v>
// and /apis/<group>/<v>.
func isDiscoveryPath(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// followed reports a redirect the HTTP client follows: one of its codes,
// with a Location to go to.
func followed(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// jsonOnly returns req asking for JSON answers only: client-go's metadata
// and discovery clients ask for protobuf first, which no count of the text
// bounds (see kubernetesAnswer).
func jsonOnly(req *http.Request) *http.Request {
	accept := req.Header.Get("Accept")
	if accept == "" || !strings.Contains(accept, "protobuf") {
		return req
	}
	var keep []string
	for _, t := range strings.Split(accept, ",") {
		if !strings.Contains(t, "protobuf") {
			keep = append(keep, strings.TrimSpace(t))
		}
	}
	if len(keep) == 0 {
		keep = []string{"application/json"}
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", strings.Join(keep, ","))
	return req
}

// isDiscoveryKind reports the answers of discovery that may carry no
// apiVersion; client-go decodes them into fixed structs.
func isDiscoveryKind(kind string) bool {
	switch kind {
	case "APIVersions", "APIGroupList", "APIGroup", "APIResourceList":
		return true
	}
	return false
}

// isWatch reports a watch request (client-go's ?watch=true), whose JSON
// answer the API server sends as plain application/json.
func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// foreignAnswer is what client-go reads instead of an answer that is not
// Kubernetes': the HTTP code and a fixed text of Vidra's, none of the body.
// It is plain text, which client-go quotes in its error whatever the
// request (a Status would be lost on discovery's requests, which read the
// raw answer).
func foreignAnswer(req *http.Request, resp *http.Response, server string) *http.Response {
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if media == "" {
		media = "no content type"
	}
	body := fmt.Sprintf("the server at %s answered HTTP %d with a body that is not a Kubernetes API answer (%s; not shown): is destination.server a Kubernetes API server?",
		server, resp.StatusCode, media)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", http.StatusBadGateway, http.StatusText(http.StatusBadGateway)),
		StatusCode:    http.StatusBadGateway,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
