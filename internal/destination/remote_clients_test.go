// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"encoding/pem"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

// newTestGuard returns the guard of c.
func newTestGuard(t *testing.T, c Guard) *guard.Guard {
	t.Helper()
	g, err := guard.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// testOperatorNamespace is the operator's namespace of remoteClientsIn.
const testOperatorNamespace = "vidra-system"

// remoteClientsIn builds Vidra's own clients of a remote cluster for srv,
// under guard g, as for a kubeconfig Secret of namespace ns: the clients of
// a tenant's namespace are bounded by its pools, those of
// testOperatorNamespace are not. Each call is a cluster of its own.
func remoteClientsIn(t *testing.T, srv *httptest.Server, g *guard.Guard, ns string) (*clusterClients, dynamic.Interface) {
	t.Helper()
	return remoteClientsOn(t, srv, g, ns, clock.RealClock{})
}

// remoteClientsOn is remoteClientsIn with the clock clk.
func remoteClientsOn(t *testing.T, srv *httptest.Server, g *guard.Guard, ns string, clk clock.Clock) (*clusterClients, dynamic.Interface) {
	t.Helper()
	r := &remotes{base: &rest.Config{QPS: 100, Burst: 100}, guard: g, clock: clk, namespace: testOperatorNamespace}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	cc, watchDyn, err := r.newRemoteClients(remoteKey{secret: cache.ObjectName{Namespace: ns, Name: "kubeconfig"}, server: srv.URL}, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return cc, watchDyn
}
