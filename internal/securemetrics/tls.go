// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The file names of a kubernetes.io/tls Secret, as cert-manager writes it.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// certCheckInterval is how often, at most, the certificate files are checked
// for a new version: cert-manager renews a certificate long before it
// expires, and the kubelet updates a mounted Secret within a minute or so,
// so checking on every handshake would only cost a flood of handshakes two
// stat calls each.
const certCheckInterval = 10 * time.Second

// TLSConfig returns the server side of the endpoint's TLS: at least TLS 1.2,
// HTTP/1.1 only, with the certificate and key of certDir (tls.crt and
// tls.key, read again when they change, so that a renewed certificate is
// served without a restart), or without certDir a self-signed ECDSA
// certificate generated now and kept in memory only.
//
// HTTP/2 is not offered: its stream multiplexing lets one connection make the
// server do work far beyond what it sends (CVE-2023-44487, rapid reset), and
// a scraper gains nothing from it.
func TLSConfig(certDir string, logger klog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if certDir == "" {
		cert, err := selfSigned(time.Now())
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil
	}
	files, err := newCertFiles(certDir, clock.RealClock{}, logger)
	if err != nil {
		return nil, err
	}
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return files.get(), nil }
	return cfg, nil
}

// selfSigned generates a certificate for this host, valid for a year from
// now. A scraper cannot verify it (it skips verification, or is given the
// certificate of a directory instead); it still keeps what is sent, the
// token above all, from anyone who only listens.
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate a key for the metrics certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate a serial for the metrics certificate: %w", err)
	}
	host, _ := os.Hostname()
	names := []string{"localhost"}
	if host != "" && host != "localhost" {
		names = append(names, host)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "vidra-metrics"},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		// An hour back: a scraper whose clock is a little behind still
		// accepts it.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create the metrics certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read the metrics certificate back: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// certFiles serves the pair of a directory, reloaded when either file's
// modification time changes. A pair that does not load (cert-manager
// writing one file before the other, say) keeps the previous one.
type certFiles struct {
	certPath, keyPath string
	clock             clock.PassiveClock
	logger            klog.Logger

	mu          sync.Mutex
	cert        *tls.Certificate
	certMod     time.Time
	keyMod      time.Time
	lastChecked time.Time
}

func newCertFiles(dir string, clk clock.PassiveClock, logger klog.Logger) (*certFiles, error) {
	f := &certFiles{certPath: filepath.Join(dir, CertFile), keyPath: filepath.Join(dir, KeyFile), clock: clk, logger: logger}
	if err := f.load(); err != nil {
		return nil, err
	}
	f.lastChecked = clk.Now()
	return f, nil
}

// load reads the pair if either file changed since the last load.
func (f *certFiles) load() error {
	certInfo, err := os.Stat(f.certPath)
	if err != nil {
		return fmt.Errorf("metrics certificate: %w", err)
	}
	keyInfo, err := os.Stat(f.keyPath)
	if err != nil {
		return fmt.Errorf("metrics certificate key: %w", err)
	}
	if f.cert != nil && certInfo.ModTime().Equal(f.certMod) && keyInfo.ModTime().Equal(f.keyMod) {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(f.certPath, f.keyPath)
	if err != nil {
		return fmt.Errorf("load metrics certificate %s and key %s: %w", f.certPath, f.keyPath, err)
	}
	f.cert, f.certMod, f.keyMod = &cert, certInfo.ModTime(), keyInfo.ModTime()
	return nil
}

// get returns the current pair, checking the files first at most every
// certCheckInterval.
func (f *certFiles) get() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.clock.Now(); now.Sub(f.lastChecked) >= certCheckInterval {
		f.lastChecked = now
		old := f.cert
		if err := f.load(); err != nil {
			f.logger.Error(err, "Keeping the metrics certificate loaded before")
		} else if f.cert != old {
			f.logger.Info("Loaded a new metrics certificate", "file", f.certPath)
		}
	}
	return f.cert
}
