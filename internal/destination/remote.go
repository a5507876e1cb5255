// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination/guard"
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
