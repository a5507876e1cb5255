// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func guard(t *testing.T, g Guard) *remoteGuard {
	t.Helper()
	rg, err := newRemoteGuard(g)
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

func TestRemoteGuardChecksTheServerURL(t *testing.T) {
	tests := []struct {
		name   string
		guard  Guard
		server string
		want   string // a fragment of the refusal; empty: allowed
	}{
		{name: "https", server: "https://cluster.example:6443"},
		{name: "loopback is allowed by default", server: "https://127.0.0.1:6443"},
		{name: "http is refused", server: "http://cluster.example", want: "--allow-http-destinations"},
		{name: "http when allowed", guard: Guard{AllowHTTP: true}, server: "http://cluster.example"},
		{name: "another scheme", server: "ftp://cluster.example", want: "not https"},
		{name: "cloud metadata", server: "https://169.254.169.254", want: "169.254.0.0/16"},
		{name: "IPv6 link-local", server: "https://[fe80::1]:443", want: "fe80::/10"},
		{name: "IPv4-mapped metadata", server: "https://[::ffff:169.254.169.254]", want: "169.254.0.0/16"},
		{name: "an empty deny list denies nothing", guard: Guard{DenyCIDRs: []netip.Prefix{}}, server: "https://169.254.169.254"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := guard(t, tc.guard).checkServer(tc.server)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v; want a refusal naming %q", err, tc.want)
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs(" 169.254.0.0/16, fe80::/10 ,,10.1.2.3/8")
	if err != nil {
		t.Fatal(err)
	}
	want := "[169.254.0.0/16 fe80::/10 10.0.0.0/8]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v; want %v", got, want)
	}
	if got, err := ParseCIDRs(""); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty string: %v, %v; want an empty, non-nil list", got, err)
	}
	if _, err := ParseCIDRs("10.0.0.0"); err == nil {
		t.Error("an address without a prefix length was accepted")
	}
}

// TestDialerChecksTheResolvedAddress: the check is on the address dialled,
// whatever name the server has.
func TestDialerChecksTheResolvedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	loopback, err := ParseCIDRs("127.0.0.0/8,::1/128")
	if err != nil {
		t.Fatal(err)
	}

	conn, err := guard(t, Guard{}).dial(t.Context(), "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("loopback refused with the default deny list: %v", err)
	}
	conn.Close()

	for _, host := range []string{"localhost", "127.0.0.1"} {
		_, err := guard(t, Guard{DenyCIDRs: loopback}).dial(t.Context(), "tcp", net.JoinHostPort(host, port))
		var denied *deniedAddressError
		if !errors.As(err, &denied) {
			t.Fatalf("%s dialled although loopback is denied: %v", host, err)
		}
		if !strings.Contains(err.Error(), "--destination-cidr-deny") {
			t.Errorf("the refusal does not name the flag: %v", err)
		}
	}
}

// TestForeignAnswersAreNotQuoted: whatever a server that is not a Kubernetes
// API server answers, the errors client-go makes of it, which become status
// messages and Events, carry none of its body.
func TestForeignAnswersAreNotQuoted(t *testing.T) {
	const secret = "internal-secret-7f3a"
	answers := map[string]struct {
		code        int
		contentType string
		body        string
	}{
		"text":           {http.StatusInternalServerError, "text/plain", secret},
		"html":           {http.StatusOK, "text/html", "<html>" + secret + "</html>"},
		"json-no-kind":   {http.StatusOK, "application/json", `{"token":"` + secret + `"}`},
		"json-error":     {http.StatusForbidden, "application/json", `{"error":"` + secret + `"}`},
		"kind-no-api":    {http.StatusOK, "application/json", `{"kind":"ConfigMap","data":"` + secret + `"}`},
		"no-type":        {http.StatusNotFound, "", secret},
		"status-message": {http.StatusForbidden, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps is forbidden","reason":"Forbidden","code":403}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/ns/configmaps/ok":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ok","namespace":"ns"},"data":{"k":"v"}}`)
			return
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.1"}`)
			return
		}
		a, ok := answers[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		} else {
			w.Header()["Content-Type"] = nil
		}
		w.WriteHeader(a.code)
		fmt.Fprint(w, a.body)
	}))
	defer srv.Close()

	g := guard(t, Guard{AllowHTTP: true})
	cfg := &rest.Config{Host: srv.URL, Dial: g.dial, Proxy: noProxy, WrapTransport: g.wrapAnswers(srv.URL, g.requests, nil, nil, nil)}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns")
	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			_, err := cms.Get(t.Context(), name, metav1.GetOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the body reached the error: %v", err)
			}
			if name == "status-message" {
				if !strings.Contains(err.Error(), "configmaps is forbidden") {
					t.Errorf("a Kubernetes Status lost its message: %v", err)
				}
				return
			}
			if want := fmt.Sprintf("answered HTTP %d", a.code); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}

	// An object of a Kubernetes API server passes untouched.
	obj, err := cms.Get(t.Context(), "ok", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "k"); v != "v" {
		t.Errorf("the object changed on its way: %v", obj.Object)
	}
	// So does the server's version, which names no kind.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil || v.GitVersion != "v1.37.1" {
		t.Errorf("server version %v, %v", v, err)
	}
}

func TestKubeconfigWithProxyURLIsRefused(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["a"] = &clientcmdapi.Cluster{Server: "https://a.example", ProxyURL: "http://169.254.169.254:3128"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	if err := selfContained(cfg.Clusters["a"], cfg.AuthInfos["u"]); err == nil || !strings.Contains(err.Error(), "proxy-url") {
		t.Fatalf("err = %v; want a refusal naming proxy-url", err)
	}
}

// TestWatchStreamsAreNotBuffered: a watch's answer never ends; the guard
// must hand it on as it comes.
func TestWatchStreamsAreNotBuffered(t *testing.T) {
	sent := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"1"}}}`+"\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-release
	}))
	defer srv.Close()
	defer close(release)

	g := guard(t, Guard{AllowHTTP: true})
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, Dial: g.dial, Proxy: noProxy, WrapTransport: g.wrapAnswers(srv.URL, g.requests, nil, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	<-sent
	ev := <-w.ResultChan()
	if o, ok := ev.Object.(*unstructured.Unstructured); !ok || o.GetName() != "a" {
		t.Fatalf("first event %v %v", ev.Type, ev.Object)
	}
}
