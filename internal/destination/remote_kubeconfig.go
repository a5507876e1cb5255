package destination

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restConfigFromKubeconfig builds a client configuration from kubeconfig
// data. With a server, it uses the context whose cluster has that server,
// preferring the current context; when none has, or without a server, the
// current context. exact reports whether the server matched, which picks
// between several Secrets carrying the earlier operator's label.
func restConfigFromKubeconfig(data []byte, server string) (cfg *rest.Config, actual string, exact bool, err error) {
	kc, err := clientcmd.Load(data)
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
