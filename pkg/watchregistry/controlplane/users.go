// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// UserConfig returns a client configuration that authenticates as user name,
// member of groups, with a client certificate signed by this control plane's
// CA. The API server sees that name in its audit log and in its authorizer,
// so a test or benchmark can tell one client's requests from another's (the
// admin Config is shared by the harness, the controller manager and kubectl)
// and can exercise RBAC as a non-admin user. Group "system:masters" makes the
// user an administrator. QPS and burst are those of Config.
func (e *Env) UserConfig(name string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := e.issueClientCert(name, groups)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	cfg.CertFile, cfg.KeyFile = "", ""
	return cfg, nil
}

// UserKubeconfig returns a kubeconfig for user name in groups, for processes
// that run outside the test binary (see UserConfig).
func (e *Env) UserKubeconfig(name string, groups ...string) ([]byte, error) {
	certPEM, keyPEM, err := e.issueClientCert(name, groups)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.creds.caCertPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: name}
	cfg.CurrentContext = "testenv"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig of user %s: %w", name, err)
	}
	return data, nil
}

// WriteUserKubeconfig writes UserKubeconfig's result to path with owner-only
// access.
func (e *Env) WriteUserKubeconfig(path, name string, groups ...string) error {
	data, err := e.UserKubeconfig(name, groups...)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// issueClientCert signs a client certificate with the CA that
// generateCredentials left in the Env's directory; the API server maps the
// common name to the user name and the organizations to groups.
func (e *Env) issueClientCert(name string, groups []string) (certPEM, keyPEM []byte, err error) {
	if name == "" {
		return nil, nil, errors.New("issue client certificate: empty user name")
	}
	caCert, caKey, err := e.loadCA()
	if err != nil {
		return nil, nil, err
	}
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create client certificate for %s: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func (e *Env) loadCA() (*x509.Certificate, any, error) {
	block, _ := pem.Decode(e.creds.caCertPEM)
	if block == nil {
		return nil, nil, errors.New("CA certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(e.Dir, "ca.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("read CA key: %w", err)
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, errors.New("CA key: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA key: %w", err)
	}
	return cert, key, nil
}
