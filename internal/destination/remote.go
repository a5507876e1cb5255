// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination/guard"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

const (
	// remoteTimeout bounds every request to a remote cluster but watches: a
	// black-holed server must not hold a shared worker for long.
	remoteTimeout = 15 * time.Second
	// livenessWindow is how long a remote cluster may answer nothing before
	// a reconcile asks it whether it is there (GET /version), and
	// probeTimeout how long that question may take: a server that hangs
	// is reported within them.
	livenessWindow = 30 * time.Second
	probeTimeout   = 5 * time.Second
	// legacyLabel marks the earlier operator's kubeconfig Secrets; its value
	// is the host of the server they are for.
	legacyLabel = "cluster-kubeconfig"
	// defaultSecretKey is the Secret key of a kubeconfig when none is named,
	// and the only one of the earlier operator's Secrets.
	defaultSecretKey = "kubeconfig"
)

// secretNotFoundError says that the Secret a remote destination needs does
// not exist. During deletion it means the managed objects can no longer be
// reached: the finalizer is removed rather than held forever.
type secretNotFoundError struct{ msg string }

func (e *secretNotFoundError) Error() string { return e.msg }

func IsSecretGone(err error) bool {
	var nf *secretNotFoundError
	return errors.As(err, &nf)
}

// forbiddenSecretError says that the identity of a resource may not read
// the kubeconfig Secret it names: Vidra does not read it for them either.
type forbiddenSecretError struct{ msg string }

func (e *forbiddenSecretError) Error() string { return e.msg }

// accessRecheck is how long a ServiceAccount's right to read a kubeconfig
// Secret, once checked, is trusted without asking again; a change of the
// Secret asks at once. It bounds how long a revoked right still works.
const accessRecheck = 10 * time.Minute

// accessKey is one identity's read of one Secret.
type accessKey struct {
	user   string
	secret cache.ObjectName
}

// accessCheck is the last successful check of an accessKey.
type accessCheck struct {
	rv string
	at time.Time
}

// remoteKey identifies the clients built from one kubeconfig (a key of a
// Secret) for one requested server; two resources naming the same Secret
// and server share them, and their informers.
type remoteKey struct {
	secret cache.ObjectName
	key    string
	server string
}

// clusterName is the watch registry's name for the cluster of k. It names
// the credentials as well as the server: two Secrets for one server may
// carry different identities, which may see different objects, so each gets
// its own informers. It is stable across rotations of the Secret, so that a
// rotation replaces the informers' clients instead of adding a cluster.
func (k remoteKey) clusterName() string {
	server := k.server
	if server == "" {
		server = "current context"
	}
	return fmt.Sprintf("%s (Secret %s, key %s)", server, k.secret, k.key)
}

// remote holds the clients built from one Secret, and rebuilds them when
// its resourceVersion changes.
type remote struct {
	key remoteKey

	// mu serializes builds, so that resources sharing a Secret read it once.
	mu     sync.Mutex
	built  bool
	metaRV string // resourceVersion in the metadata cache that led to the build
	rv     string // resourceVersion of the Secret read
	hash   [sha256.Size]byte
	cc     *clusterClients
	exact  bool
	// actual is the server of the context used: the one matching the key's
	// server when exact, else the current context's.
	actual string
	err    error
	// current is the breaker of the clients in use, read without mu by its
	// callbacks: a breaker of clients replaced since must not act.
	current atomic.Pointer[breaker]
	// guarded is what the guard holds the clients in use to, read
	// without mu when e is dropped (see dropClients).
	guarded atomic.Pointer[guard.Cluster]
}

// usage is how one VidraResource finds its remote cluster.
type usage struct {
	// namespace is where the Secret is looked up.
	namespace string
	// secret is the name of kubeconfigSecretRef; empty for the earlier
	// operator's labelled Secrets, found by host.
	secret string
	host   string
	key    string
	server string
	// remote is the entry last resolved, kept while the lookup fails so that
	// its informers survive an outage.
	remote   remoteKey
	resolved bool
	// tried are the entries the last lookup built or read, chosen or not:
	// kept while the resource looks them up, so that a lookup that fails
	// reads no Secret again until it changes, and dropped when it looks up
	// others. Every entry is someone's, so a tenant who names one server
	// after another holds one entry, not one per name.
	tried []remoteKey
}

func (u *usage) sameLookup(o *usage) bool {
	return u.namespace == o.namespace && u.secret == o.secret && u.host == o.host && u.key == o.key && u.server == o.server
}

// remotes builds and caches the clients of remote destinations from
// kubeconfig Secrets. Secrets are watched metadata-only, per namespace that
// holds resources needing one: a change of resourceVersion requeues the
// resources using that Secret, whose next reconcile reads its data once and
// rebuilds the clients. Nothing reads a Secret on a reconcile whose Secret
// did not change.
type remotes struct {
	kube      kubernetes.Interface
	md        metadata.Interface
	base      *rest.Config
	registry  *watchregistry.Registry[cache.ObjectName]
	clock     clock.Clock
	namespace string
	enqueue   func(cache.ObjectName)
	guard     *guard.Guard
	// local impersonates a resource's ServiceAccount to check that it may
	// read the kubeconfig Secret it names.
	local *clusterClients

	mu        sync.Mutex
	ctx       context.Context
	informers map[string]*secretInformer
	entries   map[remoteKey]*remote
	users     map[cache.ObjectName]*usage
	// access remembers successful checks of access to kubeconfig Secrets,
	// the maxAccessChecks used last.
	access *accessCache
	// budgets bound the caches of each namespace's remote clusters.
	budgets map[string]*watchregistry.Budget
	// wakes holds the end of the hold after which the resources of a
	// cluster over its budget are woken.
	wakes map[remoteKey]time.Time
	wg    sync.WaitGroup
}

func newRemotes(opts Options, g *guard.Guard, local *clusterClients) *remotes {
	r := &remotes{
		kube:      opts.Kube,
		base:      opts.Config,
		registry:  opts.Registry,
		clock:     opts.Clock,
		namespace: opts.Namespace,
		enqueue:   opts.Enqueue,
		guard:     g,
		local:     local,
		informers: map[string]*secretInformer{},
		entries:   map[remoteKey]*remote{},
		users:     map[cache.ObjectName]*usage{},
		access:    newAccessCache(maxAccessChecks),
		budgets:   map[string]*watchregistry.Budget{},
		wakes:     map[remoteKey]time.Time{},
	}
	switch {
	case opts.Metadata != nil:
		r.md = opts.Metadata
	case opts.Config != nil:
		// A metadata client for the Secret informers can only fail on a
		// malformed configuration, which the other clients would have
		// refused already; without one remote destinations report it.
		r.md, _ = metadata.NewForConfig(opts.Config)
	}
	return r
}

// start gives the Secret informers started later their parent context.
func (r *remotes) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx = ctx
}

// wait returns once every Secret informer has stopped (after ctx ended).
func (r *remotes) wait() { r.wg.Wait() }

// resolve returns the clients of vr's remote destination. sa is the
// ServiceAccount vr acts as ("" for the operator), which must be allowed to
// read the kubeconfig Secret vr names; trusted says whether vr's namespace
// may use the operator's own cluster-kubeconfig Secrets.
func (r *remotes) resolve(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource, sa string, trusted bool) (*clusterClients, error) {
	dst := vr.Spec.Destination
	u := &usage{server: dst.Server}
	if ref := dst.KubeconfigSecretRef; ref != nil {
		u.namespace, u.secret, u.key = vr.Namespace, ref.Name, ref.Key
		if u.key == "" {
			u.key = defaultSecretKey
		}
	} else {
		if !trusted {
			// Refused before any lookup: an untrusted resource learns nothing
			// of the administrators' Secrets, not even whether one exists.
			r.release(key)
			return nil, &refusedError{reason: v1alpha1.ReasonDestinationError, msg: fmt.Sprintf(
				"destination.server %s names no destination.kubeconfigSecretRef, and the operator's %s Secrets serve only resources of trusted namespaces (--trusted-namespaces): "+
					"put a kubeconfig for it in a Secret of namespace %s and name it in destination.kubeconfigSecretRef", dst.Server, legacyLabel, vr.Namespace)}
		}
		host, err := serverHost(dst.Server)
		if err != nil {
			r.release(key)
			return nil, err
		}
		u.namespace, u.host, u.key = r.namespace, host, defaultSecretKey
	}
	inf, err := r.use(key, u)
	if err != nil {
		return nil, err
	}
	if err := inf.waitSynced(ctx, r.clock); err != nil {
		return nil, err
	}

	rk, cc, tried, err := r.lookup(ctx, key, inf, u, vr.Namespace, sa)
	r.tried(key, tried)
	if err != nil {
		return nil, err
	}
	r.resolved(key, rk)
	if err := cc.breaker.check(); err != nil {
		return nil, err
	}
	if err := r.overBudget(rk); err != nil {
		return nil, err
	}
	// Reconciles of objects in sync are served from caches and make no
	// request: without asking, a cluster that is down, or hangs, would look
	// fine. Ask when the breaker is open, when a person asked for this
	// reconcile, and when the cluster has answered nothing for a while.
	if cc.breaker.isOpen() || probeRequested(ctx) || !cc.breaker.answeredWithin(livenessWindow) {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		_, err := cc.probe.Get().AbsPath("/version").Do(pctx).Raw()
		cancel()
		if err != nil && IsUnreachable(err) {
			return nil, err
		}
	}
	return cc, nil
}

// lookup finds the entry of u's Secret, and returns it with the entries it
// built or read on the way (see usage.tried).
func (r *remotes) lookup(ctx context.Context, key cache.ObjectName, inf *secretInformer, u *usage, namespace, sa string) (remoteKey, *clusterClients, []remoteKey, error) {
	if u.secret == "" {
		return r.legacy(ctx, key, inf, u)
	}
	meta := inf.get(u.secret)
	if meta == nil {
		return remoteKey{}, nil, nil, &secretNotFoundError{msg: fmt.Sprintf("Secret %s/%s named by destination.kubeconfigSecretRef does not exist", u.namespace, u.secret)}
	}
	if err := r.checkAccess(ctx, namespace, sa, meta); err != nil {
		return remoteKey{}, nil, nil, err
	}
	rk := remoteKey{secret: cache.MetaObjectToName(meta), key: u.key, server: u.server}
	tried := []remoteKey{rk}
	e := r.entry(key, rk)
	cc, exact, err := r.ensure(ctx, e, meta.ResourceVersion)
	if err != nil {
		return remoteKey{}, nil, tried, err
	}
	// A kubeconfig for another server is a mistake, not a choice: its
	// current context would apply the manifests to a cluster the
	// resource does not name, and record the one it names.
	if u.server != "" && !exact {
		return remoteKey{}, nil, tried, fmt.Errorf("the kubeconfig in Secret %s/%s, key %s, has no context for destination.server %s (its current context is for %s): "+
			"Vidra applies only to the server a resource names; set destination.server to the kubeconfig's, or add a context for %s to the kubeconfig",
			u.namespace, u.secret, u.key, u.server, e.actualServer(), u.server)
	}
	return rk, cc, tried, nil
}

// checkAccess makes sure that ServiceAccount sa of namespace may get the
// Secret described by meta, by getting it (metadata only) as sa: the
// operator reads every Secret it is given, and must not read one for a
// tenant who could not. A success is remembered for the Secret's version,
// for accessRecheck at most, so that it costs one request per Secret
// change, not one per reconcile; of the maxAccessChecks remembered, the
// least recently used gives way, and is checked again when next needed.
func (r *remotes) checkAccess(ctx context.Context, namespace, sa string, meta *metav1.PartialObjectMetadata) error {
	if sa == "" {
		return nil
	}
	user := "system:serviceaccount:" + namespace + ":" + sa
	ak := accessKey{user: user, secret: cache.MetaObjectToName(meta)}
	now := r.clock.Now()
	r.mu.Lock()
	ok := r.access.allowed(ak, meta.ResourceVersion, now)
	r.mu.Unlock()
	if ok {
		return nil
	}
	as, err := r.local.as(namespace, sa)
	if err != nil {
		return err
	}
	_, err = as.meta.Resource(secretsResource).Namespace(meta.Namespace).Get(ctx, meta.Name, metav1.GetOptions{})
	r.mu.Lock()
	if err == nil {
		r.access.add(ak, accessCheck{rv: meta.ResourceVersion, at: now}, now)
	} else {
		// An outdated check that failed again is of no more use.
		r.access.remove(ak)
	}
	r.mu.Unlock()
	switch {
	case apierrors.IsForbidden(err):
		return &forbiddenSecretError{msg: fmt.Sprintf(
			"ServiceAccount %s/%s may not get Secret %s/%s named by destination.kubeconfigSecretRef, so Vidra does not read it either: "+
				"grant it get on that Secret (a Role and RoleBinding in %s), or name a Secret it may read", namespace, sa, meta.Namespace, meta.Name, meta.Namespace)}
	case apierrors.IsNotFound(err):
		return &secretNotFoundError{msg: fmt.Sprintf("Secret %s/%s named by destination.kubeconfigSecretRef does not exist", meta.Namespace, meta.Name)}
	case err != nil:
		return fmt.Errorf("check that ServiceAccount %s/%s may get Secret %s/%s: %w", namespace, sa, meta.Namespace, meta.Name, err)
	}
	return nil
}

// legacy finds the earlier operator's Secret for u's server: labelled with
// its host, in the operator's namespace only, so that no tenant can plant
// credentials for everyone. Several Secrets for one host (servers on other
// ports) are told apart by the server their kubeconfig names.
func (r *remotes) legacy(ctx context.Context, key cache.ObjectName, inf *secretInformer, u *usage) (remoteKey, *clusterClients, []remoteKey, error) {
	metas := inf.labelled(u.host)
	if len(metas) == 0 {
		return remoteKey{}, nil, nil, &secretNotFoundError{msg: fmt.Sprintf("no Secret labelled %s=%s in the operator's namespace %s holds a kubeconfig for %s; create one, or set destination.kubeconfigSecretRef",
			legacyLabel, u.host, u.namespace, u.server)}
	}
	type match struct {
		rk remoteKey
		cc *clusterClients
	}
	var matches []match
	var names []string
	var errs []error
	var tried []remoteKey
	for _, m := range metas {
		// Every candidate stays cached, chosen or not, while the resource
		// tries them (usage.tried), so that telling them apart reads no
		// Secret again until one changes; a candidate's clients start no
		// informer unless a resource uses them.
		rk := remoteKey{secret: cache.MetaObjectToName(m), key: u.key, server: u.server}
		names = append(names, m.Name)
		tried = append(tried, rk)
		cc, exact, err := r.ensure(ctx, r.entry(key, rk), m.ResourceVersion)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(metas) == 1 || exact {
			matches = append(matches, match{rk, cc})
		}
	}
	var chosen match
	if len(matches) == 1 {
		chosen = matches[0]
	}
	switch {
	case chosen.cc != nil:
		return chosen.rk, chosen.cc, tried, nil
	case len(metas) == 1:
		return remoteKey{}, nil, tried, errs[0]
	case len(matches) > 1:
		return remoteKey{}, nil, tried, fmt.Errorf("Secrets %s in namespace %s are labelled %s=%s and all have a kubeconfig context for %s: keep one",
			strings.Join(names, ", "), u.namespace, legacyLabel, u.host, u.server)
	}
	msg := fmt.Sprintf("Secrets %s in namespace %s are labelled %s=%s, and none has a kubeconfig context for %s",
		strings.Join(names, ", "), u.namespace, legacyLabel, u.host, u.server)
	if len(errs) > 0 {
		return remoteKey{}, nil, tried, fmt.Errorf("%s: %w", msg, errors.Join(errs...))
	}
	return remoteKey{}, nil, tried, errors.New(msg)
}

// use records how key finds its Secret and returns the informer of the
// namespace to look in, starting it if needed.
func (r *remotes) use(key cache.ObjectName, u *usage) (*secretInformer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.md == nil {
		return nil, errors.New("remote destinations need the operator's client configuration (Options.Config)")
	}
	if u.secret == "" && r.namespace == "" {
		return nil, errors.New("the operator's namespace is not set, so Secrets labelled " + legacyLabel + " cannot be looked up; set destination.kubeconfigSecretRef")
	}
	if r.ctx == nil || r.ctx.Err() != nil {
		return nil, errors.New("the controller is not running")
	}
	prev := r.users[key]
	if prev != nil && prev.sameLookup(u) {
		u = prev
	} else {
		r.users[key] = u
	}
	inf := r.informers[u.namespace]
	if inf == nil {
		var err error
		if inf, err = r.startInformerLocked(u.namespace); err != nil {
			return nil, err
		}
	}
	if prev != nil && prev != u {
		r.dropUnusedLocked(prev)
		r.stopInformerIfUnusedLocked(prev.namespace)
	}
	return inf, nil
}

// resolved records the entry key's lookup found, and lets go of the one it
// found before, if nobody else uses it.
func (r *remotes) resolved(key cache.ObjectName, rk remoteKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.users[key]
	if u == nil || (u.resolved && u.remote == rk) {
		return
	}
	prev, had := u.remote, u.resolved
	u.remote, u.resolved = rk, true
	if had {
		r.dropIfUnusedLocked(prev)
	}
}

// tried records the entries key's last lookup built or read, and lets go
// of those it tried before and no longer does, if nobody else uses them. A
// resource released meanwhile holds none.
func (r *remotes) tried(key cache.ObjectName, tried []remoteKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.users[key]
	prev := tried
	if u != nil {
		prev, u.tried = u.tried, tried
	}
	for _, rk := range prev {
		if u == nil || !slices.Contains(tried, rk) {
			r.dropIfUnusedLocked(rk)
		}
	}
}

// dropUnusedLocked lets go of the entries of u, no longer in r.users, that
// nobody else uses.
func (r *remotes) dropUnusedLocked(u *usage) {
	if u.resolved {
		r.dropIfUnusedLocked(u.remote)
	}
	for _, rk := range u.tried {
		r.dropIfUnusedLocked(rk)
	}
}

// release forgets key's use of a remote destination: it was deleted, or now
// applies to the local cluster.
func (r *remotes) release(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.users[key]
	if u == nil {
		return
	}
	delete(r.users, key)
	r.dropUnusedLocked(u)
	r.stopInformerIfUnusedLocked(u.namespace)
}

// dropIfUnusedLocked removes the entry rk, its clients and the informers of
// its registry cluster, when no resource uses or tries it. The registry
// calls back into the controller's queue, never into remotes, so holding
// r.mu is safe.
func (r *remotes) dropIfUnusedLocked(rk remoteKey) {
	if _, ok := r.entries[rk]; !ok {
		return
	}
	for _, u := range r.users {
		if u.resolved && u.remote == rk || slices.Contains(u.tried, rk) {
			return
		}
	}
	r.entries[rk].dropClients()
	delete(r.entries, rk)
	r.registry.RemoveCluster(rk.clusterName())
}

// entry returns the entry rk, made if needed, and counts it among those
// key's lookup tries at once: else, until the lookup ends, another
// resource letting go of the entry could drop it, and its clients, under
// this one.
func (r *remotes) entry(key cache.ObjectName, rk remoteKey) *remote {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[rk]
	if e == nil {
		e = &remote{key: rk}
		r.entries[rk] = e
	}
	if u := r.users[key]; u != nil && !slices.Contains(u.tried, rk) {
		u.tried = append(u.tried, rk)
	}
	return e
}

// ensure brings e up to date with its Secret, whose resourceVersion in the
// metadata cache is metaRV. The Secret is read only when that changed; the
// clients are rebuilt only when the kubeconfig itself changed.
func (r *remotes) ensure(ctx context.Context, e *remote, metaRV string) (_ *clusterClients, exact bool, _ error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.built && (metaRV == e.metaRV || metaRV == e.rv) {
		return e.cc, e.exact, e.err
	}
	logger := klog.FromContext(ctx).WithValues("secret", e.key.secret.String())
	ns, name := e.key.secret.Namespace, e.key.secret.Name
	sec, err := r.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, &secretNotFoundError{msg: fmt.Sprintf("Secret %s/%s does not exist", ns, name)}
	}
	if err != nil {
		return nil, false, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	e.built, e.metaRV, e.rv = true, metaRV, sec.ResourceVersion

	data, ok := sec.Data[e.key.key]
	if !ok {
		e.setFailed(r, fmt.Errorf("Secret %s/%s has no key %q (keys: %s)", ns, name, e.key.key, strings.Join(secretKeys(sec.Data), ", ")))
		return nil, false, e.err
	}
	hash := sha256.Sum256(data)
	if e.cc != nil && e.err == nil && hash == e.hash {
		// Labels or annotations changed, not the kubeconfig.
		return e.cc, e.exact, nil
	}
	cfg, server, exact, err := restConfigFromKubeconfig(data, e.key.server)
	if err == nil {
		err = r.guard.CheckServer(server)
	}
	if err != nil {
		e.setFailed(r, fmt.Errorf("kubeconfig in Secret %s/%s, key %s: %w", ns, name, e.key.key, err))
		return nil, false, e.err
	}
	cc, watchDyn, err := r.newRemoteClients(e.key, cfg, server)
	if err != nil {
		e.setFailed(r, fmt.Errorf("clients from the kubeconfig in Secret %s/%s: %w", ns, name, err))
		return nil, false, e.err
	}
	b := cc.breaker
	b.onTrip = func() {
		if r.inUse(e, b) {
			r.enqueueUsersOf(e.key)
		}
	}
	b.onRecover = func() {
		if !r.inUse(e, b) {
			return
		}
		// The informers' caches missed the outage's changes and their
		// reflectors may be deep in backoff: fresh informers list now.
		r.setCluster(e, watchDyn)
		r.enqueueUsersOf(e.key)
	}
	rotated := e.cc != nil
	e.guarded.Swap(cc.guarded).Close()
	e.cc, e.hash, e.exact, e.actual, e.err = cc, hash, exact, server, nil
	e.current.Store(cc.breaker)
	// Registering (or replacing) the cluster restarts its informers on the
	// new credentials, and tells the resources that watch through them.
	r.mu.Lock()
	current := r.entries[e.key] == e
	r.mu.Unlock()
	if current {
		r.setCluster(e, watchDyn)
	} else {
		// Dropped meanwhile: its clients serve this call only.
		e.dropClients()
	}
	logger.Info("Built clients for a remote destination", "server", server, "rotated", rotated)
	return cc, exact, nil
}

// setCluster gives the registry the informers' clients of e, charging
// their caches to the budget of the namespace of e's Secret: a tenant
// names as many clusters as it has Secrets, so a budget per cluster would
// bound nothing.
func (r *remotes) setCluster(e *remote, watchDyn dynamic.Interface) {
	ns := e.key.secret.Namespace
	r.mu.Lock()
	b := r.budgets[ns]
	if b == nil {
		objects, bytes := r.guard.CacheBudget()
		b = watchregistry.NewBudget(objects, watchregistry.MaxBytes(bytes), watchregistry.BudgetName(ns))
		r.budgets[ns] = b
	}
	r.mu.Unlock()
	r.registry.SetCluster(e.key.clusterName(), watchDyn, nil, watchregistry.WithBudget(b))
}

// overBudget refuses to work on a cluster of a namespace whose remote
// clusters went over their cache budget, while the informers of the one
// that did are held: nothing would watch its objects, and every reconcile
// would read them all from its server. Any cluster of the namespace, not
// only the held one: a tenant that names the same server through a new
// Secret would otherwise have it listed again at once.
func (r *remotes) overBudget(rk remoteKey) error {
	r.mu.Lock()
	keys := []remoteKey{rk}
	for k := range r.entries {
		if k != rk && k.secret.Namespace == rk.secret.Namespace {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	for _, held := range keys {
		until, err := r.registry.Held(held.clusterName())
		if err == nil {
			continue
		}
		r.wakeAfter(rk, until)
		which := "the cluster at " + held.server
		if held != rk {
			which += fmt.Sprintf(" (Secret %s, key %s), and watches no other cluster of the namespace until then,", held.secret, held.key)
		}
		// A plain error: DestinationUnavailable, retried with backoff, and
		// woken when the hold is over.
		return fmt.Errorf(
			"the remote clusters of namespace %s would make Vidra cache more than %d objects or %s with Vidra's marks that no resource deploying there declares, the most it caches for one namespace (--destination-cache-objects, --destination-cache-size): "+
				"Vidra stopped watching %s and tries again in %s. If it is a Kubernetes API server, keep fewer objects with Vidra's labels on the namespace's remote clusters, or have the operator's administrators raise the limits",
			rk.secret.Namespace, err.Max, wording.Bytes(err.MaxBytes), which, until.Sub(r.clock.Now()).Round(time.Second))
	}
	return nil
}

// wakeAfter requeues the resources of cluster rk when the hold of its
// informers ends, once per hold: their retries back off, and would come
// well after it.
func (r *remotes) wakeAfter(rk remoteKey, until time.Time) {
	r.mu.Lock()
	ctx := r.ctx
	if ctx == nil || r.wakes[rk].Equal(until) {
		r.mu.Unlock()
		return
	}
	r.wakes[rk] = until
	r.mu.Unlock()
	t := r.clock.NewTimer(until.Sub(r.clock.Now()))
	r.wg.Go(func() {
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return
		}
		r.mu.Lock()
		if r.wakes[rk].Equal(until) {
			delete(r.wakes, rk)
		}
		r.mu.Unlock()
		r.enqueueUsersOf(rk)
	})
}

// dropClients gives back what e's clients hold of their namespace's pools,
// as they are replaced or e is forgotten. Called with r.mu held, which
// ensure takes while it holds e.mu: the clients' account is taken without
// e.mu.
func (e *remote) dropClients() {
	e.guarded.Swap(nil).Close()
}

// actualServer is the server of the context the clients were built for.
func (e *remote) actualServer() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.actual
}

// inUse reports whether b is the breaker of the clients e serves, and e is
// still cached: the callbacks of replaced or dropped clients must not act.
func (r *remotes) inUse(e *remote, b *breaker) bool {
	if e.current.Load() != b {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries[e.key] == e
}

// setFailed records a Secret that cannot be used; clients built from its
// earlier content are dropped, since its owner meant to replace them.
func (e *remote) setFailed(r *remotes, err error) {
	e.current.Store(nil)
	if e.cc != nil {
		r.registry.RemoveCluster(e.key.clusterName())
		e.dropClients()
	}
	e.cc, e.err, e.hash = nil, err, [sha256.Size]byte{}
}

func secretKeys(data map[string][]byte) []string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// newRemoteClients builds the clients of one remote cluster: for requests,
// with a timeout; for informers, without one, since a watch is one long
// request (their lists get one from the guard), and with room for lists in
// an answer. Both go through one circuit breaker, dial through the guard
// (checked addresses, no proxy) and have answers that are not a Kubernetes
// API server's replaced; impersonating clients copy all of it.
func (r *remotes) newRemoteClients(rk remoteKey, cfg *rest.Config, server string) (*clusterClients, dynamic.Interface, error) {
	b := newBreaker(server, r.clock, r.guard.SlowAnswer())
	cfg.QPS, cfg.Burst, cfg.UserAgent = r.base.QPS, r.base.Burst, r.base.UserAgent
	cfg.Dial, cfg.Proxy = r.guard.Dial, guard.NoProxy
	// The breaker sits outermost: a replaced answer is still an answer, and
	// the time to read it whole is part of the answer's time; one over its
	// limit is a failure (one refused for what it would make Vidra hold
	// fails its request only).
	watchCfg := rest.CopyConfig(cfg)
	// The discovery client, whose documents the RESTMapper keeps, has
	// clients of its own, so that its answers are told apart by the client
	// that asked, not by their path.
	discCfg := rest.CopyConfig(cfg)
	// The operator's own namespace holds the administrators' Secrets (the
	// earlier operator's labelled ones), which no tenant writes: its
	// clusters are not bounded as a tenant's are.
	var gc *guard.Cluster
	if ns := rk.secret.Namespace; ns != r.namespace {
		gc = r.guard.Tenant(server, ns, b.fail)
		// Over HTTP/2 a server may send 4 MiB a stream ahead of what
		// Vidra reads, held in the heap, outside the watch pool, as long as
		// the stream waits for its pace: over HTTP/1.1 a watch waits on its
		// connection's window instead.
		watchCfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
		warnings := &warningLog{server: server, clock: r.clock}
		for _, c := range []*rest.Config{cfg, watchCfg, discCfg} {
			c.WarningHandler, c.WarningHandlerWithContext = nil, warnings
		}
	} else {
		gc = r.guard.Own(server, b.fail)
	}
	cfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Requests, b.wrap)
	watchCfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Informers, b.wrapUntimed)
	discCfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Discovery, b.wrap)
	discCfg.Timeout = remoteTimeout
	cfg.Timeout = remoteTimeout

	// The request clients share one HTTP client, and its connections.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	probe, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	watchDyn, err := dynamic.NewForConfig(watchCfg)
	if err != nil {
		return nil, nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(discCfg)
	if err != nil {
		return nil, nil, err
	}
	cc, err := newClusterClients(rk.clusterName(), cfg, dyn, md, newMapper(dc, r.clock))
	if err != nil {
		return nil, nil, err
	}
	cc.breaker, cc.probe, cc.guarded, cc.http = b, probe.RESTClient(), gc, hc
	return cc, gc.Lists(watchDyn), nil
}

// enqueueUsersOf requeues the resources of a cluster that came back, so that
// they do not wait out a backoff grown during the outage.
func (r *remotes) enqueueUsersOf(rk remoteKey) {
	r.mu.Lock()
	var keys []cache.ObjectName
	for k, u := range r.users {
		if u.resolved && u.remote == rk {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	for _, k := range keys {
		r.enqueue(k)
	}
}

// secretChanged requeues the resources that look up a Secret that was
// created, changed or deleted. A deleted Secret also takes its clients and
// informers with it.
func (r *remotes) secretChanged(namespace, name string, labelled, deleted bool) {
	r.mu.Lock()
	var keys []cache.ObjectName
	for k, u := range r.users {
		if u.namespace == namespace && (u.secret == name || (u.secret == "" && labelled)) {
			keys = append(keys, k)
		}
	}
	if deleted {
		r.access.forgetSecret(cache.ObjectName{Namespace: namespace, Name: name})
		for rk := range r.entries {
			if rk.secret.Namespace == namespace && rk.secret.Name == name {
				r.entries[rk].dropClients()
				delete(r.entries, rk)
				r.registry.RemoveCluster(rk.clusterName())
			}
		}
	}
	r.mu.Unlock()
	for _, k := range keys {
		r.enqueue(k)
	}
}
