// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
)

// kubeconfig encodes contexts named for their servers, with current as the
// current context.
func kubeconfig(t *testing.T, current string, servers map[string]string, user *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	if user == nil {
		user = &clientcmdapi.AuthInfo{Token: "t"}
	}
	cfg.AuthInfos["user"] = user
	for name, server := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "user"}
	}
	cfg.CurrentContext = current
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRestConfigFromKubeconfigPicksTheContextOfTheServer(t *testing.T) {
	servers := map[string]string{"a": "https://a.example:6443", "b": "https://b.example:6443"}
	tests := []struct {
		name, current, server string
		wantHost              string
		wantExact             bool
	}{
		{"current context matches", "a", "https://a.example:6443", "https://a.example:6443", true},
		{"another context matches", "a", "https://b.example:6443", "https://b.example:6443", true},
		{"matched regardless of case and trailing slash", "a", "https://B.example:6443/", "https://b.example:6443", true},
		{"no server: current context", "b", "", "https://b.example:6443", false},
		{"no context matches: current context", "a", "https://c.example", "https://a.example:6443", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, actual, exact, err := restConfigFromKubeconfig(kubeconfig(t, tc.current, servers, nil), tc.server)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost || actual != tc.wantHost || exact != tc.wantExact {
				t.Errorf("host %q (server %q, exact %v); want %q, exact %v", cfg.Host, actual, exact, tc.wantHost, tc.wantExact)
			}
		})
	}
}

func TestRestConfigFromKubeconfigRefusesWhatRunsOrReadsInTheOperator(t *testing.T) {
	servers := map[string]string{"a": "https://a.example"}
	tests := []struct {
		name string
		user *clientcmdapi.AuthInfo
		want string
	}{
		{"exec plugin", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh", APIVersion: "client.authentication.k8s.io/v1"}}, "exec"},
		{"auth provider", &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}, "auth-provider"},
		{"token file", &clientcmdapi.AuthInfo{TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "tokenFile"},
		{"client certificate file", &clientcmdapi.AuthInfo{ClientCertificate: "/etc/cert.pem", ClientKey: "/etc/key.pem"}, "client-certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := restConfigFromKubeconfig(kubeconfig(t, "a", servers, tc.user), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want a refusal naming %q", err, tc.want)
			}
		})
	}
	if _, _, _, err := restConfigFromKubeconfig([]byte("{not yaml"), ""); err == nil {
		t.Error("garbage parsed as a kubeconfig")
	}
}

func TestServerNames(t *testing.T) {
	tests := []struct {
		server   string
		host     string
		local    bool
		hostFail bool
	}{
		{server: "https://10.0.0.1:6443", host: "10.0.0.1"},
		{server: "https://api.prod.example.com", host: "api.prod.example.com"},
		{server: "", local: true, hostFail: true},
		{server: "https://kubernetes.default.svc", host: "kubernetes.default.svc", local: true},
		{server: "https://kubernetes.default.svc:443/", host: "kubernetes.default.svc", local: true},
		{server: "not a url", hostFail: true},
	}
	for _, tc := range tests {
		host, err := serverHost(tc.server)
		if (err != nil) != tc.hostFail || host != tc.host {
			t.Errorf("serverHost(%q) = %q, %v; want %q (error: %v)", tc.server, host, err, tc.host, tc.hostFail)
		}
		if got := IsLocalServer(tc.server); got != tc.local {
			t.Errorf("IsLocalServer(%q) = %v; want %v", tc.server, got, tc.local)
		}
	}
}

// stubTransport answers with err, or with 200 when err is nil, and counts
// the requests that reached it.
type stubTransport struct {
	err   error
	calls int
}

func (s *stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func TestBreakerFailsFastAfterAConnectionError(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBreaker("https://remote.example", clk, 0)
	var tripped, recovered int
	b.onTrip = func() { tripped++ }
	b.onRecover = func() { recovered++ }
	stub := &stubTransport{err: errors.New("connect: connection refused")}
	rt := b.wrap(stub)
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, "https://remote.example/version", nil)
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		return err
	}

	if err := get(); !IsUnreachable(err) || stub.calls != 1 || tripped != 1 {
		t.Fatalf("first failure: err %v, calls %d, tripped %d", err, stub.calls, tripped)
	}
	// Within the cooldown nothing reaches the network.
	for range 5 {
		if err := get(); !IsUnreachable(err) {
			t.Fatalf("err = %v during the cooldown", err)
		}
	}
	if stub.calls != 1 || b.check() == nil {
		t.Fatalf("requests reached the server during the cooldown: %d", stub.calls)
	}
	// After it, one trial goes through; failing, it starts a new cooldown
	// without tripping again.
	clk.Step(breakerCooldown)
	if err := get(); !IsUnreachable(err) || stub.calls != 2 || tripped != 1 {
		t.Fatalf("failed trial: err %v, calls %d, tripped %d", err, stub.calls, tripped)
	}
	// The server is back: the next trial closes the breaker, once.
	stub.err = nil
	clk.Step(breakerCooldown)
	if err := get(); err != nil || recovered != 1 || b.isOpen() {
		t.Fatalf("successful trial: err %v, recovered %d, open %v", err, recovered, b.isOpen())
	}
	if err := get(); err != nil || stub.calls != 4 || recovered != 1 {
		t.Fatalf("closed breaker: err %v, calls %d, recovered %d", err, stub.calls, recovered)
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
