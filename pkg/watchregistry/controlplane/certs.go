// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files and PEM blocks one control plane needs. They are
// generated in Go for every Env so that no two control planes trust each other
// and no external tool (openssl, cfssl) is needed.
type credentials struct {
	caCertPEM     []byte
	adminCertPEM  []byte
	adminKeyPEM   []byte
	caFile        string
	servingCert   string
	servingKey    string
	saPublicKey   string
	saPrivateKey  string
	adminCertFile string
	adminKeyFile  string
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

// generateCredentials writes a CA, a serving certificate for the loopback
// address, an admin client certificate in group system:masters and a service
// account signing key pair into dir.
func generateCredentials(dir, name string) (*credentials, error) {
	now := time.Now()
	caKey, caKeyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name + "-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}

	issue := func(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, keyPEM, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		if tmpl.SerialNumber, err = serial(); err != nil {
			return nil, nil, err
		}
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(7*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("create certificate %q: %w", tmpl.Subject.CommonName, err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
	}

	servingCertPEM, servingKeyPEM, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	})
	if err != nil {
		return nil, err
	}
	adminCertPEM, adminKeyPEM, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name + "-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, saKeyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service account public key: %w", err)
	}

	c := &credentials{
		caCertPEM:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		adminCertPEM:  adminCertPEM,
		adminKeyPEM:   adminKeyPEM,
		caFile:        filepath.Join(dir, "ca.crt"),
		servingCert:   filepath.Join(dir, "apiserver.crt"),
		servingKey:    filepath.Join(dir, "apiserver.key"),
		saPublicKey:   filepath.Join(dir, "sa.pub"),
		saPrivateKey:  filepath.Join(dir, "sa.key"),
		adminCertFile: filepath.Join(dir, "admin.crt"),
		adminKeyFile:  filepath.Join(dir, "admin.key"),
	}
	files := map[string][]byte{
		c.caFile:                     c.caCertPEM,
		filepath.Join(dir, "ca.key"): caKeyPEM,
		c.servingCert:                servingCertPEM,
		c.servingKey:                 servingKeyPEM,
		c.saPublicKey:                pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		c.saPrivateKey:               saKeyPEM,
		c.adminCertFile:              adminCertPEM,
		c.adminKeyFile:               adminKeyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(name), err)
		}
	}
	return c, nil
}
