// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/internal/destination"
)

// Exported is a kubeconfig ready for a destination's Secret.
type Exported struct {
	// Kubeconfig is the self-contained kubeconfig, current context set.
	Kubeconfig []byte
	// Server is the API server URL of its cluster: the value of the
	// VidraResource's spec.destination.server.
	Server string
	// Inlined names the files whose content the kubeconfig holds, as
	// "certificate-authority of cluster prod (path)", for the person to
	// check; empty unless Options.EmbedFiles.
	Inlined []string
}

// Options are what the person asked Export for.
type Options struct {
	// EmbedFiles inlines the files the context names (certificate
	// authority, client certificate and key, token file). Without it such
	// a context is refused: a kubeconfig merged from several files (the
	// KUBECONFIG list) may name any file of the machine, and the Secret,
	// which every holder of the namespace's edit role reads, would carry
	// its content.
	EmbedFiles bool
}

// Export returns the context contextName of cfg as a self-contained
// kubeconfig the operator accepts from a Secret, or an error that says
// why the operator would refuse it, or which file it names that opts do
// not allow to inline. cfg is not changed.
func Export(cfg *clientcmdapi.Config, contextName string, opts Options) (*Exported, error) {
	if contextName == "" {
		return nil, fmt.Errorf("no context given: --context names the context of the destination cluster (contexts: %s)", contexts(cfg))
	}
	if _, ok := cfg.Contexts[contextName]; !ok {
		return nil, fmt.Errorf("context %q is not in the kubeconfig (contexts: %s)", contextName, contexts(cfg))
	}
	kc := cfg.DeepCopy()
	kc.CurrentContext = contextName
	if err := clientcmdapi.MinifyConfig(kc); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	// A plugin is refused whatever the files: the person needs to hear
	// that the operator cannot run it at all.
	for _, user := range kc.AuthInfos {
		if user.Exec != nil || user.AuthProvider != nil {
			return nil, refused(check(kc))
		}
	}
	for _, user := range kc.AuthInfos {
		if user.Token != "" {
			// client-go prefers the token; the file is then unused.
			user.TokenFile = ""
		}
	}
	files := Files(kc)
	if len(files) > 0 && !opts.EmbedFiles {
		return nil, fmt.Errorf("context %q names local files, whose content the Secret would hold: %s; "+
			"pass --embed-files to inline them, or use a context whose kubeconfig holds the data itself "+
			"(certificate-authority-data, client-certificate-data, client-key-data, token)", contextName, strings.Join(files, ", "))
	}
	ferr := clientcmdapi.FlattenConfig(kc)
	if ferr == nil {
		ferr = inlineTokenFiles(kc)
	}
	if ferr != nil {
		return nil, fmt.Errorf("context %q: inline the files it names: %w", contextName, ferr)
	}
	// Where each piece came from means nothing inside the cluster.
	for _, c := range kc.Clusters {
		c.LocationOfOrigin = ""
	}
	for _, u := range kc.AuthInfos {
		u.LocationOfOrigin = ""
	}
	for _, c := range kc.Contexts {
		c.LocationOfOrigin = ""
	}
	kc.Preferences = clientcmdapi.Preferences{}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("context %q: encode kubeconfig: %w", contextName, err)
	}
	server, err := destination.CheckKubeconfig(data)
	if err != nil {
		return nil, refused(err)
	}
	return &Exported{Kubeconfig: data, Server: server, Inlined: files}, nil
}

// Files names each file kc's clusters and users name, as
// "certificate-authority of cluster prod (path)", sorted.
func Files(kc *clientcmdapi.Config) []string {
	var files []string
	add := func(field, kind, name, path string) {
		if path != "" {
			files = append(files, fmt.Sprintf("%s of %s %q (%s)", field, kind, name, path))
		}
	}
	for name, c := range kc.Clusters {
		add("certificate-authority", "cluster", name, c.CertificateAuthority)
	}
	for name, u := range kc.AuthInfos {
		add("client-certificate", "user", name, u.ClientCertificate)
		add("client-key", "user", name, u.ClientKey)
		add("tokenFile", "user", name, u.TokenFile)
	}
	slices.Sort(files)
	return files
}

// inlineTokenFiles reads each user's tokenFile into its token, which
// FlattenConfig leaves alone.
func inlineTokenFiles(kc *clientcmdapi.Config) error {
	for name, user := range kc.AuthInfos {
		if user.TokenFile == "" {
			continue
		}
		token, err := os.ReadFile(clientcmdapi.ResolvePath(user.TokenFile, filepath.Dir(user.LocationOfOrigin)))
		if err != nil {
			return fmt.Errorf("user %q: read tokenFile: %w", name, err)
		}
		user.Token, user.TokenFile = strings.TrimSpace(string(token)), ""
	}
	return nil
}

// check runs the operator's check on kc.
func check(kc *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	_, err = destination.CheckKubeconfig(data)
	return err
}

func refused(err error) error {
	return fmt.Errorf("the operator would refuse this kubeconfig in a Secret: %w; "+
		"use a context with a client certificate or a token (for example a ServiceAccount token) instead", err)
}

func contexts(cfg *clientcmdapi.Config) string {
	names := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
