// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"

	"github.com/vidra-operator/vidra/internal/manifest"
)

// A kubeconfig comes from a Secret a tenant writes, and is parsed in the
// operator's process, shared by every tenant: like a manifest, it is read
// under bounds before any decoder sees it.
const (
	// maxKubeconfigBytes bounds its size. A kubeconfig for one cluster is
	// 1 to 10 KiB with its certificates and key embedded (a CA of about
	// 1.5 KiB, a client certificate and key of about 5 KiB, base64); 256 KiB
	// holds a merged file of some 25 such clusters. Larger ones are whole
	// laptop configurations, of which Vidra uses one context:
	// `kubectl config view --minify --flatten` writes just that one.
	maxKubeconfigBytes = 256 << 10
	// maxKubeconfigNodes bounds its nodes (keys, values, list items), as
	// manifest.MaxNodes does a manifest's, counted before the YAML parser
	// builds them (about 250 bytes allocated each): at most about 5 MiB per
	// parse. One context, its cluster and its user are about 30 nodes, so
	// this is some 600 clusters, far more than the size cap lets through
	// with certificates; only text written to be dense reaches it.
	maxKubeconfigNodes = 20000
)

// kubeconfigCodec decodes a kubeconfig from JSON only: the bounded front end
// of internal/manifest turned it into JSON, and clientcmd's own codec would
// run it through a YAML parser again, which expands aliases without a bound.
var kubeconfigCodec = func() runtime.Codec {
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, clientcmdlatest.Scheme, clientcmdlatest.Scheme, json.SerializerOptions{})
	return versioning.NewDefaultingCodecForScheme(clientcmdlatest.Scheme, s, s,
		schema.GroupVersion{Version: clientcmdlatest.Version}, runtime.InternalGroupVersioner)
}()

// loadKubeconfig parses kubeconfig data as clientcmd.Load does, with the
// bounds above.
func loadKubeconfig(data []byte) (*clientcmdapi.Config, error) {
	if len(data) > maxKubeconfigBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d bytes (%d KiB); keep only the context Vidra needs (kubectl config view --minify --flatten)",
			len(data), maxKubeconfigBytes, maxKubeconfigBytes>>10)
	}
	js, err := manifest.DocumentJSON(string(data), maxKubeconfigNodes)
	if err != nil {
		if e := (*manifest.Error)(nil); errors.As(err, &e) && e.Reason == manifest.ReasonManifestTooLarge {
			return nil, fmt.Errorf("%w, more than a kubeconfig needs; keep only the context Vidra needs (kubectl config view --minify --flatten)", err)
		}
		return nil, err
	}
	if string(js) == "null" {
		// As clientcmd.Load: an empty file is an empty configuration.
		return clientcmdapi.NewConfig(), nil
	}
	decoded, _, err := kubeconfigCodec.Decode(js, &schema.GroupVersionKind{Version: clientcmdlatest.Version, Kind: "Config"}, clientcmdapi.NewConfig())
	if err != nil {
		return nil, err
	}
	kc, ok := decoded.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("kubeconfig decodes to a %T, not a Config", decoded)
	}
	return kc, nil
}

// restConfigFromKubeconfig builds a client configuration from kubeconfig
// data. With a server, it uses the context whose cluster has that server,
// preferring the current context; when none has, or without a server, the
// current context. exact reports whether the server matched, which picks
// between several Secrets carrying the earlier operator's label.
func restConfigFromKubeconfig(data []byte, server string) (cfg *rest.Config, actual string, exact bool, err error) {
	kc, err := loadKubeconfig(data)
	if err != nil {
		return nil, "", false, fmt.Errorf("parse kubeconfig: %w", err)
	}
	if len(kc.Contexts) == 0 {
		return nil, "", false, errors.New("kubeconfig has no contexts")
	}
	name := kc.CurrentContext
	if server != "" {
		names := make([]string, 0, len(kc.Contexts))
		for n := range kc.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		// The current context first, then the others in a stable order.
		names = append([]string{kc.CurrentContext}, names...)
		for _, n := range names {
			if c := kc.Contexts[n]; c != nil && kc.Clusters[c.Cluster] != nil && sameServer(kc.Clusters[c.Cluster].Server, server) {
				name, exact = n, true
				break
			}
		}
	}
	c := kc.Contexts[name]
	if c == nil {
		return nil, "", false, fmt.Errorf("kubeconfig has no current context (contexts: %s)", strings.Join(contextNames(kc), ", "))
	}
	cluster := kc.Clusters[c.Cluster]
	if cluster == nil || cluster.Server == "" {
		return nil, "", false, fmt.Errorf("context %q of the kubeconfig names no cluster with a server", name)
	}
	if err := selfContained(cluster, kc.AuthInfos[c.AuthInfo]); err != nil {
		return nil, "", false, fmt.Errorf("context %q: %w", name, err)
	}
	cfg, err = clientcmd.NewNonInteractiveClientConfig(*kc, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, "", false, fmt.Errorf("context %q: %w", name, err)
	}
	return cfg, cluster.Server, exact, nil
}

// CheckKubeconfig applies to kubeconfig data the checks the operator
// applies to a kubeconfig Secret, and returns the server of its current
// context: it must parse, its current context must name a cluster with a
// server, and it must be self-contained (see selfContained). Tools that
// write such Secrets (kubectl vidra cluster add) call it so that they
// refuse exactly what the operator would refuse.
func CheckKubeconfig(data []byte) (server string, err error) {
	_, server, _, err = restConfigFromKubeconfig(data, "")
	return server, err
}

func contextNames(kc *clientcmdapi.Config) []string {
	names := make([]string, 0, len(kc.Contexts))
	for n := range kc.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// selfContained refuses what a kubeconfig from a Secret must not do inside
// the operator: run a program (exec and auth-provider plugins), read the
// operator's own files (its ServiceAccount token, its certificates), or
// send its requests through a proxy, which would reach for it whatever
// address --destination-cidr-deny keeps it from. A tenant who may write a
// Secret would otherwise act as the operator.
func selfContained(cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) error {
	var bad []string
	if cluster.CertificateAuthority != "" {
		bad = append(bad, "certificate-authority (a file; use certificate-authority-data)")
	}
	if cluster.ProxyURL != "" {
		bad = append(bad, "proxy-url (Vidra connects to destinations directly)")
	}
	if user != nil {
		if user.Exec != nil {
			bad = append(bad, "exec (credential plugins run programs in the operator)")
		}
		if user.AuthProvider != nil {
			bad = append(bad, "auth-provider (plugins run in the operator)")
		}
		if user.ClientCertificate != "" {
			bad = append(bad, "client-certificate (a file; use client-certificate-data)")
		}
		if user.ClientKey != "" {
			bad = append(bad, "client-key (a file; use client-key-data)")
		}
		if user.TokenFile != "" {
			bad = append(bad, "tokenFile (a file; use token)")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("kubeconfig uses what Vidra does not allow from a Secret: %s", strings.Join(bad, ", "))
	}
	return nil
}

// sameServer compares API server URLs as a person would: scheme and host
// case-insensitively, the default port made explicit, a trailing slash
// ignored.
func sameServer(a, b string) bool {
	ua, errA := url.Parse(strings.TrimSpace(a))
	ub, errB := url.Parse(strings.TrimSpace(b))
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) &&
		strings.EqualFold(ua.Hostname(), ub.Hostname()) &&
		portOf(ua) == portOf(ub) &&
		strings.TrimSuffix(ua.Path, "/") == strings.TrimSuffix(ub.Path, "/")
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "http") {
		return "80"
	}
	return "443"
}

// serverHost is the value the earlier operator's cluster-kubeconfig label
// carries for a server URL: its host, without scheme or port.
func serverHost(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("destination.server %q: %w", server, err)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("destination.server %q has no host", server)
	}
	return u.Hostname(), nil
}

// IsLocalServer reports the spellings of the cluster Vidra runs in.
func IsLocalServer(server string) bool {
	return server == "" || sameServer(server, inClusterServer)
}
