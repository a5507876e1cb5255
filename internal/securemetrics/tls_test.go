// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

// serveTLS serves a 200 behind cfg as the operator does, on a loopback
// port, until the test ends.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})}
	go func() { _ = srv.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// handshake connects to addr with client's settings (verification skipped,
// as a scraper of a self-signed certificate does) and returns the state.
func handshake(addr string, client *tls.Config) (tls.ConnectionState, error) {
	client.InsecureSkipVerify = true
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, client)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	return conn.ConnectionState(), nil
}

func TestWithoutADirectoryACertificateIsGenerated(t *testing.T) {
	cfg, err := TLSConfig("", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	state, err := handshake(serveTLS(t, cfg), &tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := state.PeerCertificates[0]
	key, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Errorf("the generated certificate's key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		t.Errorf("the generated certificate is not valid now: %s to %s", leaf.NotBefore, leaf.NotAfter)
	}
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("extended key usage %v, want server authentication", leaf.ExtKeyUsage)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("the certificate does not name the loopback address: %v", err)
	}
	again, err := TLSConfig("", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Certificates[0].Certificate[0]) == string(cfg.Certificates[0].Certificate[0]) {
		t.Error("two starts generated the same certificate")
	}
}

func TestOldTLSVersionsAndHTTP2AreRefused(t *testing.T) {
	cfg, err := TLSConfig("", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cfg)
	if _, err := handshake(addr, &tls.Config{MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if _, err := handshake(addr, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}); err != nil {
		t.Errorf("a TLS 1.2 handshake failed: %v", err)
	}
	state, err := handshake(addr, &tls.Config{NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if state.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", state.NegotiatedProtocol)
	}
}

// writePair writes a new certificate and key into dir, with a modification
// time of its own, and returns the certificate.
func writePair(t *testing.T, dir string, mod time.Time) []byte {
	t.Helper()
	cert, err := selfSigned(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), mod)
	write(t, filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), mod)
	return cert.Certificate[0]
}

func write(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func TestTheDirectorysCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	want := writePair(t, dir, t0)
	cfg, err := TLSConfig(dir, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	state, err := handshake(serveTLS(t, cfg), &tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if string(state.PeerCertificates[0].Raw) != string(want) {
		t.Error("the server did not present the directory's certificate")
	}
}

// A renewed pair is served without a restart, once the files were checked
// again; a pair that does not load keeps the one before.
func TestARenewedCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, t0)
	clk := testingclock.NewFakeClock(t0)
	files, err := newCertFiles(dir, clk, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	second := writePair(t, dir, t0.Add(time.Minute))
	if got := files.get().Certificate[0]; string(got) != string(first) {
		t.Error("the files were read again before the check interval passed")
	}
	clk.Step(certCheckInterval)
	if got := files.get().Certificate[0]; string(got) != string(second) {
		t.Error("the renewed certificate is not served after the check interval")
	}
	write(t, filepath.Join(dir, CertFile), []byte("not a certificate"), t0.Add(2*time.Minute))
	clk.Step(certCheckInterval)
	if got := files.get().Certificate[0]; string(got) != string(second) {
		t.Error("a pair that does not load replaced the one before")
	}
}

func TestAMissingCertificateFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	_, err := TLSConfig(dir, klog.Background())
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), CertFile) {
		t.Errorf("error %v, want one naming the missing %s", err, CertFile)
	}
}
