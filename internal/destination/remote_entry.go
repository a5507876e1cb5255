// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

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
