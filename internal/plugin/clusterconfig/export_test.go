// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/internal/destination"
)

// kubeconfig is a person's kubeconfig with three contexts: one whose
// credentials are in files, one with a token, one with a credential plugin.
func kubeconfig(t *testing.T) *clientcmdapi.Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kc := clientcmdapi.NewConfig()
	origin := filepath.Join(dir, "config")
	kc.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example.com:6443", CertificateAuthority: write("ca.crt", "CA"), LocationOfOrigin: origin}
	kc.Clusters["dev"] = &clientcmdapi.Cluster{Server: "https://dev.example.com", CertificateAuthorityData: []byte("DEVCA"), LocationOfOrigin: origin}
	kc.AuthInfos["files"] = &clientcmdapi.AuthInfo{ClientCertificate: write("u.crt", "CERT"), ClientKey: write("u.key", "KEY"), LocationOfOrigin: origin}
	kc.AuthInfos["token"] = &clientcmdapi.AuthInfo{TokenFile: "token", LocationOfOrigin: origin}
	write("token", "s3cr3t\n")
	kc.AuthInfos["cloud"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "cloud-login"}}
	kc.AuthInfos["oidc"] = &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "oidc"}}
	kc.Contexts["prod-files"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "files", Namespace: "web"}
	kc.Contexts["dev-token"] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "token"}
	kc.Contexts["prod-cloud"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "cloud"}
	kc.Contexts["prod-oidc"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "oidc"}
	kc.CurrentContext = "dev-token"
	return kc
}

func TestExportInlinesFilesAndKeepsOneContext(t *testing.T) {
	kc := kubeconfig(t)
	got, err := Export(kc, "prod-files", Options{EmbedFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != "https://prod.example.com:6443" {
		t.Errorf("server %q", got.Server)
	}
	out, err := clientcmd.Load(got.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if out.CurrentContext != "prod-files" || len(out.Contexts) != 1 || len(out.Clusters) != 1 || len(out.AuthInfos) != 1 {
		t.Errorf("not minified to prod-files: %+v", out)
	}
	if c := out.Clusters["prod"]; string(c.CertificateAuthorityData) != "CA" || c.CertificateAuthority != "" {
		t.Errorf("certificate authority not inlined: %+v", c)
	}
	if u := out.AuthInfos["files"]; string(u.ClientCertificateData) != "CERT" || string(u.ClientKeyData) != "KEY" || u.ClientCertificate != "" || u.ClientKey != "" {
		t.Errorf("client certificate not inlined: %+v", u)
	}
	if strings.Contains(string(got.Kubeconfig), filepath.Dir(kc.Clusters["prod"].LocationOfOrigin)) {
		t.Errorf("the kubeconfig names a local path:\n%s", got.Kubeconfig)
	}
	if _, err := destination.CheckKubeconfig(got.Kubeconfig); err != nil {
		t.Errorf("the operator refuses it: %v", err)
	}
	if kc.Clusters["prod"].CertificateAuthority == "" {
		t.Error("Export changed its argument")
	}
}

func TestExportInlinesATokenFile(t *testing.T) {
	got, err := Export(kubeconfig(t), "dev-token", Options{EmbedFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := clientcmd.Load(got.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if u := out.AuthInfos["token"]; u.Token != "s3cr3t" || u.TokenFile != "" {
		t.Errorf("token file not inlined: %+v", u)
	}
}

func TestExportRefusesWhatTheOperatorRefuses(t *testing.T) {
	tests := []struct{ context, want string }{
		{"prod-cloud", "exec (credential plugins run programs in the operator)"},
		{"prod-oidc", "auth-provider (plugins run in the operator)"},
		{"missing", `context "missing" is not in the kubeconfig (contexts: dev-token, prod-cloud, prod-files, prod-oidc)`},
		{"", "no context given"},
	}
	for _, tc := range tests {
		t.Run(tc.context, func(t *testing.T) {
			_, err := Export(kubeconfig(t), tc.context, Options{EmbedFiles: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestExportRefusesAProxy(t *testing.T) {
	kc := kubeconfig(t)
	kc.Clusters["dev"].ProxyURL = "http://proxy.example.com:3128"
	if _, err := Export(kc, "dev-token", Options{EmbedFiles: true}); err == nil || !strings.Contains(err.Error(), "proxy-url") {
		t.Errorf("error %v, want the operator's refusal of proxy-url", err)
	}
}

// A context naming files is refused unless asked to inline them, with the
// field, the file and the flag named; a token beside its tokenFile leaves
// the file unused, so nothing is read.
func TestExportRefusesFilesItWasNotAskedToInline(t *testing.T) {
	kc := kubeconfig(t)
	kc.AuthInfos["both"] = &clientcmdapi.AuthInfo{Token: "t", TokenFile: "token"}
	kc.Contexts["dev-both"] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "both"}
	tests := []struct {
		context string
		want    []string
	}{
		{"prod-files", []string{`certificate-authority of cluster "prod" (` + kc.Clusters["prod"].CertificateAuthority + ")",
			`client-certificate of user "files"`, `client-key of user "files"`, "--embed-files"}},
		{"dev-token", []string{`tokenFile of user "token" (token)`, "--embed-files"}},
		{"dev-both", nil},
	}
	for _, tc := range tests {
		t.Run(tc.context, func(t *testing.T) {
			got, err := Export(kc, tc.context, Options{})
			if tc.want == nil {
				if err != nil || len(got.Inlined) != 0 {
					t.Fatalf("Export = %+v, %v; want it to read no file", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Export inlined files it was not asked to:\n%s", got.Kubeconfig)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got, err := Export(kc, tc.context, Options{EmbedFiles: true}); err != nil || len(got.Inlined) != len(tc.want)-1 {
				t.Errorf("with EmbedFiles: %+v, %v; want %d files inlined", got, err, len(tc.want)-1)
			}
		})
	}
}
