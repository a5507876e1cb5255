// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// remoteTenant creates a tenant namespace with ServiceAccount "deployer",
// which may read Secret "remote" there, holding a kubeconfig for cluster;
// it returns the namespace. Whatever follows is refused for the
// destination, not for the identity.
func remoteTenant(t *testing.T, cluster *clientcmdapi.Cluster) string {
	t.Helper()
	ns := tenantNamespace(t)
	serviceAccount(t, ns, "deployer")
	grant(t, ns, "deployer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"remote"}, Verbs: []string{"get"}})
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "remote"},
		Data:       map[string][]byte{"kubeconfig": tenantKubeconfig(t, cluster)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// tenantKubeconfig is a kubeconfig for cluster whose one context
// authenticates with a tenant's bearer token.
func tenantKubeconfig(t *testing.T, cluster *clientcmdapi.Cluster) []byte {
	t.Helper()
	return tokenKubeconfig(t, cluster, "tenant-token")
}

// tokenKubeconfig is a kubeconfig for cluster whose one context
// authenticates with bearer token.
func tokenKubeconfig(t *testing.T, cluster *clientcmdapi.Cluster, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["remote"] = cluster
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "user"}
	cfg.CurrentContext = "remote"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// toRemoteSecret points a resource at server through Secret "remote", acting
// as "deployer".
func toRemoteSecret(server string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) {
		vr.Spec.ServiceAccountName = "deployer"
		vr.Spec.Destination.Server = server
		vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "remote", Key: "kubeconfig"}
	}
}

// createVRThroughAnotherSecret creates resource name of ns on server,
// through a copy, remote-again, of the namespace's kubeconfig Secret
// remote: another cluster of the same server, for Vidra.
func createVRThroughAnotherSecret(t *testing.T, ns, name, manifest, server string) {
	t.Helper()
	kubeconfig, err := kube.CoreV1().Secrets(ns).Get(t.Context(), "remote", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "remote-again"}, Data: kubeconfig.Data,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant(t, ns, "deployer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"remote", "remote-again"}, Verbs: []string{"get"}})
	createVR(t, ns, name, manifest, func(vr *v1alpha1.VidraResource) {
		toRemoteSecret(server)(vr)
		vr.Spec.Destination.KubeconfigSecretRef.Name = "remote-again"
	})
}

// countingServer is a server on loopback that counts the requests it gets
// and answers them all with handler.
func countingServer(t *testing.T, tls bool, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handler(w, r)
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

// readyMessageOf waits for the resource to report reason in Ready=False and
// returns the message.
func readyMessageOf(t *testing.T, ns, name, reason string) string {
	t.Helper()
	vr := waitVR(t, ns, name, "reported "+reason, hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, reason))
	return meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
}

// TestRemoteDestinationCannotUseAProxy: a proxy would reach, for the
// tenant, addresses Vidra refuses to connect to.
func TestRemoteDestinationCannotUseAProxy(t *testing.T) {
	proxy, hits := countingServer(t, false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: "https://169.254.169.254", ProxyURL: proxy.URL})
	createVR(t, ns, "proxied", cmDoc("x"), toRemoteSecret("https://169.254.169.254"))
	msg := readyMessageOf(t, ns, "proxied", v1alpha1.ReasonDestinationError)
	if !strings.Contains(msg, "proxy-url") {
		t.Errorf("message does not name proxy-url: %s", msg)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the proxy got %d requests", n)
	}
}

// TestRemoteDestinationMustUseHTTPS: a plain-http server would get the
// tenant's token and manifests in clear text; the operator does not even
// connect.
func TestRemoteDestinationMustUseHTTPS(t *testing.T) {
	srv, hits := countingServer(t, false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: srv.URL})
	createVR(t, ns, "clear", cmDoc("x"), toRemoteSecret(srv.URL))
	msg := readyMessageOf(t, ns, "clear", v1alpha1.ReasonDestinationError)
	if !strings.Contains(msg, "https") || !strings.Contains(msg, "--allow-http-destinations") {
		t.Errorf("message does not say https is required and how to allow http: %s", msg)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the http server got %d requests", n)
	}
}

// TestRemoteDestinationCannotReachCloudMetadata: the link-local range,
// where clouds hand out instance credentials, is denied by default.
func TestRemoteDestinationCannotReachCloudMetadata(t *testing.T) {
	const metadata = "https://169.254.169.254"
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: metadata, InsecureSkipTLSVerify: true})
	createVR(t, ns, "imds", cmDoc("x"), toRemoteSecret(metadata))
	msg := readyMessageOf(t, ns, "imds", v1alpha1.ReasonDestinationError)
	if !strings.Contains(msg, "169.254.0.0/16") || !strings.Contains(msg, "--destination-cidr-deny") {
		t.Errorf("message does not name the denied range and the flag: %s", msg)
	}
}

// TestForeignServerAnswersAreNotShown: a tenant points Vidra at a server
// that is no Kubernetes API server, to read its answers through the
// resource's status and Events. They say the HTTP status, never the body.
func TestForeignServerAnswersAreNotShown(t *testing.T) {
	const secret = "s3cr3t-from-an-internal-service"
	srv, hits := countingServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/apis") {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "internal error: %s", secret)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"credentials":%q}`, secret)
	})
	ca := pemCertificate(srv)
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca})
	createVR(t, ns, "peek", cmDoc("x"), toRemoteSecret(srv.URL))
	vr := waitVR(t, ns, "peek", "failed on the foreign server", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && vr.Status.ObservedGeneration == vr.Generation &&
			strings.Contains(c.Message, "not a Kubernetes API answer")
	})
	if hits.Load() == 0 {
		t.Fatal("the server got no request; the test proves nothing")
	}
	// The Ready message is in the Event the same reconcile recorded.
	ready := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	waitEventOn(t, ns, "peek", "", "not a Kubernetes API answer")
	for _, c := range vr.Status.Conditions {
		if strings.Contains(c.Message, secret) {
			t.Errorf("condition %s quotes the server: %s", c.Type, c.Message)
		}
	}
	for _, m := range eventsOn(t, ns, "peek", "") {
		if strings.Contains(m, secret) {
			t.Errorf("an Event quotes the server: %s", m)
		}
	}
	t.Logf("Ready: %s", ready.Message)
}

// pemCertificate is the PEM of srv's certificate, to trust it.
func pemCertificate(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
