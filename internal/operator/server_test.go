// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/securemetrics"
)

// testLimits are limits long enough that a test sees none of them unless it
// shortens the one it checks.
var testLimits = serverLimits{readHeader: time.Minute, read: time.Minute, write: time.Minute, idle: time.Minute, maxHeaderBytes: 64 << 10}

// serveTest serves handler as serve does, over TLS, on a loopback port until
// the test ends, and returns the address.
func serveTest(t *testing.T, handler http.Handler, limits serverLimits) string {
	t.Helper()
	return serveTestWith(t, handler, limits, klog.Background(), nil)
}

// serveTestWith is serveTest with the server's logger, and configure, if
// not nil, called on the server before it serves.
func serveTestWith(t *testing.T, handler http.Handler, limits serverLimits, logger klog.Logger, configure func(*http.Server)) string {
	t.Helper()
	cfg, err := securemetrics.TLSConfig("", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	l, err := listen("127.0.0.1:0", limits, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(handler, limits, true, logger)
	if configure != nil {
		configure(srv)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

func dialTLS(t *testing.T, addr string) *tls.Conn {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// roundTrip sends a request of header lines on conn and reads its answer.
func roundTrip(t *testing.T, conn net.Conn, r *bufio.Reader, lines ...string) *http.Response {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, strings.Join(lines, "\r\n")+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// expectClosed waits, for 30 s at most, for the server to close conn, of
// which r reads.
func expectClosed(t *testing.T, conn net.Conn, r io.Reader, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := r.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		t.Errorf("%s: the server sent more", what)
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("%s: the connection is still open after 30 s", what)
	case !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET):
		t.Errorf("%s: read %v, want the connection closed", what, err)
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

// A refused client's connection is closed after the answer: it does not
// wait for the idle timeout, at a slot of the capped connections.
func TestARefusedClientsConnectionIsClosed(t *testing.T) {
	h := securemetrics.NewAuthorizer(securemetrics.Options{Client: fake.NewClientset()}).Wrap(http.HandlerFunc(ok))
	addr := serveTest(t, h, testLimits)
	for _, tc := range []struct {
		name   string
		method string
		status int
	}{
		{"without a token", http.MethodGet, http.StatusUnauthorized},
		{"another method", http.MethodPost, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialTLS(t, addr)
			r := bufio.NewReader(conn)
			if resp := roundTrip(t, conn, r, tc.method+" /metrics HTTP/1.1", "Host: vidra"); resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			expectClosed(t, conn, r, "after the refusal")
		})
	}
}

// A connection kept alive is closed once idle for the idle timeout.
func TestAnIdleConnectionIsClosed(t *testing.T) {
	limits := testLimits
	limits.idle = 100 * time.Millisecond
	conn := dialTLS(t, serveTest(t, http.HandlerFunc(ok), limits))
	r := bufio.NewReader(conn)
	if resp := roundTrip(t, conn, r, "GET /metrics HTTP/1.1", "Host: vidra"); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, closing %t; want 200 kept alive", resp.StatusCode, resp.Close)
	}
	expectClosed(t, conn, r, "idle after an answer")
}

// A request that announces a body and never sends it is cut off at the read
// timeout, whether the handler refuses it or answers it without reading the
// body: the server would otherwise wait to discard the body for ever.
func TestARequestWhoseBodyNeverComesIsCutOff(t *testing.T) {
	limits := testLimits
	limits.read = 300 * time.Millisecond
	refusing := securemetrics.NewAuthorizer(securemetrics.Options{Client: fake.NewClientset()}).Wrap(http.HandlerFunc(ok))
	for _, tc := range []struct {
		name    string
		handler http.Handler
		status  int
	}{
		{"refused", refusing, http.StatusUnauthorized},
		{"answered", http.HandlerFunc(ok), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialTLS(t, serveTest(t, tc.handler, limits))
			r := bufio.NewReader(conn)
			if resp := roundTrip(t, conn, r, "GET /metrics HTTP/1.1", "Host: vidra", "Content-Length: 10"); resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			expectClosed(t, conn, r, "with the body still to come")
		})
	}
}

// A client that stalls in the TLS handshake, or in its headers, is cut off
// at the header timeout.
func TestAStalledHandshakeOrHeaderIsCutOff(t *testing.T) {
	limits := testLimits
	limits.readHeader = 200 * time.Millisecond
	addr := serveTest(t, http.HandlerFunc(ok), limits)

	t.Run("handshake", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The header of a handshake record of 255 bytes, and none of them.
		if _, err := conn.Write([]byte{0x16, 0x03, 0x01, 0x00, 0xff}); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, conn, conn, "in the handshake")
	})
	t.Run("headers", func(t *testing.T) {
		conn := dialTLS(t, addr)
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: vidra\r\n"); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, conn, conn, "in the headers")
	})
}

// Headers past the limit are refused with 431; a large token still fits.
func TestTooLargeHeadersAreRefused(t *testing.T) {
	h := securemetrics.NewAuthorizer(securemetrics.Options{Client: fake.NewClientset()}).Wrap(http.HandlerFunc(ok))
	addr := serveTest(t, h, metricsLimits)
	for _, tc := range []struct {
		name   string
		size   int
		status int
	}{
		{"60 KiB", 60 << 10, http.StatusUnauthorized},
		{"80 KiB", 80 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialTLS(t, addr)
			r := bufio.NewReader(conn)
			if resp := roundTrip(t, conn, r, "GET /metrics HTTP/1.1", "Host: vidra", "X-Padding: "+strings.Repeat("x", tc.size)); resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// acceptWaitsForASlot reports whether a server's accept loop waits for one of
// its capped connections to close: the loop's goroutine is parked in the
// limit listener, before it accepts the next connection.
func acceptWaitsForASlot() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], []byte("netutil.(*limitListener).acquire"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitForTheCap waits until the accept loop of a server at its cap waits.
func waitForTheCap(t *testing.T, open int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return acceptWaitsForASlot(), nil
	}); err != nil {
		t.Fatalf("with %d connections open, the server still accepts more", open)
	}
}

// Past the cap, a connection waits until one of those open closes.
func TestConnectionsAreCapped(t *testing.T) {
	limits := testLimits
	limits.maxConns = 2
	addr := serveTest(t, http.HandlerFunc(ok), limits)
	var open []*tls.Conn
	for range limits.maxConns {
		conn := dialTLS(t, addr)
		if resp := roundTrip(t, conn, bufio.NewReader(conn), "GET /metrics HTTP/1.1", "Host: vidra"); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		open = append(open, conn)
	}
	waitForTheCap(t, len(open))

	late := make(chan int, 1)
	go func() {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			late <- 0
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: vidra\r\n\r\n"); err != nil {
			late <- 0
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			late <- 0
			return
		}
		late <- resp.StatusCode
	}()
	_ = open[0].Close()
	select {
	case code := <-late:
		if code != http.StatusOK {
			t.Errorf("the connection past the cap, once one closed: status %d, want 200", code)
		}
	case <-time.After(30 * time.Second):
		t.Error("the connection past the cap was not served within 30 s of one closing")
	}
}

// A scrape of a large registry, through the reviews, over TLS, ends well
// within the metrics server's write timeout, which bounds the whole answer.
func TestALargeScrapeEndsWithinTheWriteTimeout(t *testing.T) {
	const resources = 10000
	reg := prometheus.NewRegistry()
	for _, name := range []string{"vidra_test_reconciles_total", "vidra_test_applies_total", "vidra_test_objects"} {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Per resource, as many as a large install has."}, []string{"namespace", "vidraresource"})
		reg.MustRegister(v)
		for i := range resources {
			v.WithLabelValues(fmt.Sprintf("tenant-%d", i%100), fmt.Sprintf("app-%d", i)).Set(float64(i))
		}
	}
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		out := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
		return true, out, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, apiruntime.Object, error) {
		out := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		out.Status.Allowed = true
		return true, out, nil
	})
	h := securemetrics.NewAuthorizer(securemetrics.Options{Client: client}).Wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	addr := serveTest(t, h, metricsLimits)

	// As Prometheus scrapes: gzip asked for, the answer decompressed.
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-of-the-scraper")
	start := time.Now()
	resp, err := scraper.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("after %s: %v", took, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := bytes.Count(body, []byte("\nvidra_test_")); n != 3*resources {
		t.Errorf("%d series in %d bytes, want %d", n, len(body), 3*resources)
	}
	t.Logf("%d series, %d KiB, in %s; the write timeout is %s", 3*resources, len(body)>>10, took, metricsLimits.write)
}

// Failed handshakes, which any port scan makes, write a few log lines at
// debug level, not a line each.
func TestFailedHandshakesLogAHandfulOfLines(t *testing.T) {
	var mu sync.Mutex
	lines := 0
	logger := funcr.New(func(string, string) {
		mu.Lock()
		defer mu.Unlock()
		lines++
	}, funcr.Options{Verbosity: 1})
	var closed atomic.Int64
	addr := serveTestWith(t, http.HandlerFunc(ok), testLimits, logger, func(srv *http.Server) {
		srv.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed.Add(1)
			}
		}
	})

	const handshakes = 1000
	for range handshakes {
		conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return closed.Load() == handshakes, nil
	}); err != nil {
		t.Fatalf("the server closed %d of %d connections", closed.Load(), handshakes)
	}
	mu.Lock()
	defer mu.Unlock()
	if lines == 0 || lines > 3 {
		t.Errorf("%d failed handshakes wrote %d log lines, want 1 to 3", handshakes, lines)
	}
}

// serve gives each server the limits docs/security.md gives: both the
// timeouts and the header limit, the metrics server its cap.
func TestTheServersKeepTheirLimits(t *testing.T) {
	o := &Operator{
		opts:    Options{MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0", MetricsSecure: true, Metrics: prometheus.NewRegistry()},
		reviews: fake.NewClientset(),
	}
	srvs, err := o.serve(klog.NewContext(t.Context(), logr.Discard()), nil)
	if err != nil {
		t.Fatal(err)
	}
	// After the connections below close, which the test's end does first.
	t.Cleanup(srvs.shutdown)
	if len(srvs) != 2 {
		t.Fatalf("%d servers, want metrics and probes", len(srvs))
	}
	want := serverLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 90 * time.Second, maxHeaderBytes: 64 << 10}
	for i, name := range []string{"metrics", "probes"} {
		srv := srvs[i]
		got := serverLimits{readHeader: srv.ReadHeaderTimeout, read: srv.ReadTimeout, write: srv.WriteTimeout, idle: srv.IdleTimeout, maxHeaderBytes: srv.MaxHeaderBytes}
		if got != want {
			t.Errorf("the %s server's limits: %+v, want %+v", name, got, want)
		}
	}
	const maxConns = 64
	metricsAddr, _ := o.ServedAddrs()
	for range maxConns {
		dialTLS(t, metricsAddr)
	}
	waitForTheCap(t, maxConns)
}
