// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// TestTenantBacklogDoesNotStarveAnotherNamespace: one tenant creates 50
// resources of 60 objects each, every one of them failing on one object
// (in a namespace its ServiceAccount may not write) so that they keep
// retrying; another
// tenant's resource created right after must not wait behind that backlog.
// Counted, not timed: the reconciles of the noisy tenant that finish
// between the quiet resource's creation and its own first reconcile are
// those already running (one per worker) and at most a couple more, where
// a shared FIFO makes it wait for the whole backlog.
func TestTenantBacklogDoesNotStarveAnotherNamespace(t *testing.T) {
	noisy, quiet := tenantNamespace(t), tenantNamespace(t)
	// Its 3,050 ConfigMaps take a while to delete: the next test must not
	// run on an API server and an operator still busy with them.
	drainOnCleanup(t, noisy, 3*time.Minute)
	serviceAccount(t, noisy, "deployer", noisy)
	serviceAccount(t, quiet, "deployer", quiet)

	const resources, objects = 50, 60
	for i := range resources {
		var b strings.Builder
		for j := range objects {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d-%d\ndata:\n  k: v\n", i, j)
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lost-%d\n  namespace: %s-missing\n", i, noisy)
		createVR(t, noisy, fmt.Sprintf("noisy-%d", i), b.String(), asServiceAccount("deployer"))
	}
	created := len(reconciles.snapshot())
	createVR(t, quiet, "quiet", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quiet\ndata:\n  k: v\n", asServiceAccount("deployer"))
	waitVR(t, quiet, "quiet", "became Ready", isReady)

	quietKey := cache.ObjectName{Namespace: quiet, Name: "quiet"}
	noisyBefore := 0
	for _, k := range reconciles.waitFor(t, created, quietKey) {
		if k == quietKey {
			break
		}
		if k.Namespace == noisy {
			noisyBefore++
		}
	}
	// Those running when the quiet resource is queued finish first, one
	// per worker. The log is in the order reconciles finish, and begins
	// before the create request: a few more may finish while the create
	// reaches the operator, or begin after the quiet one and finish before
	// it. With a shared FIFO, 47 finished first.
	const slack = 2
	t.Logf("%d reconciles of the noisy tenant finished between the quiet resource's creation and its first reconcile", noisyBefore)
	if noisyBefore > operatorWorkers+slack {
		t.Errorf("the quiet tenant's resource waited for %d reconciles of the noisy tenant's backlog; want at most %d: the %d running, and %d finishing around its creation and its own reconcile",
			noisyBefore, operatorWorkers+slack, operatorWorkers, slack)
	}
	// The noisy tenant's resources keep failing, and are reported so.
	waitVR(t, noisy, "noisy-0", "reported its missing namespace", hasCondition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonForbidden))
}

// TestSlowRemoteServerDoesNotHoldEveryWorker: one tenant points as many
// resources as there are workers, through a Secret each, at a server of its
// own that answers every request correctly but slowly, under the request
// timeout. Once every worker waits on it, another namespace's resource is
// created: it must get the first worker that is free, and each slow answer
// frees one, because the breaker takes a server slower than
// --destination-slow-answer (5 s) for unavailable, and the tenant's
// reconciles then end at once. Counted, not timed: until the other
// resource's first reconcile, no client of the tenant's Secrets sends the
// server more than one slow request. Before, each of the tenant's
// reconciles went on through every object's discovery, three slow
// requests an object, and the other resource waited 1m43s.
func TestSlowRemoteServerDoesNotHoldEveryWorker(t *testing.T) {
	// Over the 5 s limit, under the 15 s request timeout.
	const delay = 8 * time.Second
	stop := make(chan struct{})
	held := make(chan struct{})
	var hits, inFlight atomic.Int64
	var heldOnce sync.Once
	// Slow requests begun once every worker waited, by client: each
	// Secret's kubeconfig has a token of its own.
	var mu sync.Mutex
	slowAfterHeld := map[string]int{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/version" {
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.1"}`)
			return
		}
		select {
		case <-held:
			mu.Lock()
			slowAfterHeld[r.Header.Get("Authorization")]++
			mu.Unlock()
		default:
		}
		if inFlight.Add(1) >= operatorWorkers {
			heldOnce.Do(func() { close(held) })
		}
		defer inFlight.Add(-1)
		select {
		case <-time.After(delay):
		case <-stop:
			return
		case <-r.Context().Done():
			return
		}
		switch r.URL.Path {
		case "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","apiVersion":"v1","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`)
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[]}`)
		case "/apis":
			fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })

	attacker := tenantNamespace(t)
	serviceAccount(t, attacker, "deployer")
	grant(t, attacker, "deployer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	// Objects of a kind no cluster knows: each mapping reads discovery,
	// three slow requests, and there are two per resource.
	manifest := "apiVersion: example.com/v1\nkind: Slow\nmetadata: {name: a}\n---\napiVersion: example.com/v1\nkind: Slow\nmetadata: {name: b}\n"
	for i := range operatorWorkers {
		// A Secret each: separate clients, so separate breakers.
		name := fmt.Sprintf("remote-%d", i)
		data := tokenKubeconfig(t, &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: pemCertificate(srv)}, "token-"+name)
		if _, err := kube.CoreV1().Secrets(attacker).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"kubeconfig": data},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createVR(t, attacker, fmt.Sprintf("slow-%d", i), manifest, func(vr *v1alpha1.VidraResource) {
			vr.Spec.ServiceAccountName = "deployer"
			vr.Spec.Destination.Server = srv.URL
			vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: name, Key: "kubeconfig"}
		})
	}
	victim := tenant(t)
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatalf("the slow server never had a request of every worker at once (%d requests)", hits.Load())
	}

	created := len(reconciles.snapshot())
	start := time.Now()
	createVR(t, victim, "innocent", cmDoc("innocent"), asServiceAccount("deployer"))
	victimKey := cache.ObjectName{Namespace: victim, Name: "innocent"}
	log := reconciles.waitFor(t, created, victimKey)
	// Read at once: a client's next slow request is the trial of its
	// breaker, 30 s after the slow answer that opened it.
	mu.Lock()
	slow := maps.Clone(slowAfterHeld)
	mu.Unlock()
	waitVR(t, victim, "innocent", "became Ready", isReady)
	// The tenant's reconciles that finish first are not bounded by the
	// workers: those the open breakers end at once run on the other
	// workers while the other resource's own reconcile runs. They are
	// logged, for a failure to be read.
	t.Logf("another namespace's one-ConfigMap resource became Ready %v after every worker waited on the slow server; reconciles before its first: %v; slow requests begun since every worker waited, by client: %v; %d requests in all",
		time.Since(start).Round(time.Millisecond), log[:slices.Index(log, victimKey)], slow, hits.Load())
	// Without the breaker a worker goes on from a slow answer to the next
	// of its reconcile's six, and the other resource waits for all six.
	for client, n := range slow {
		if n > 1 {
			t.Errorf("the client of %q sent the slow server %d requests before the other namespace's resource got a worker; want at most one: its breaker should have opened at the first slow answer", client, n)
		}
	}

	// The tenant is told why.
	msg := readyMessageOf(t, attacker, "slow-0", v1alpha1.ReasonDestinationError)
	if !strings.Contains(msg, "answered") || !strings.Contains(msg, "slower than 5s as unavailable") {
		t.Errorf("message does not say the server was too slow: %s", msg)
	}
	t.Logf("Ready: %s", msg)
}
