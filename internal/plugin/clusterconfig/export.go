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
}

// Export returns the context contextName of cfg as a self-contained
// kubeconfig the operator accepts from a Secret, or an error that says
// why the operator would refuse it. cfg is not changed.
func Export(cfg *clientcmdapi.Config, contextName string) (*Exported, error) {
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
	ferr := clientcmdapi.FlattenConfig(kc)
	if ferr == nil {
		ferr = inlineTokenFiles(kc)
	}
	// A plugin is refused whatever the files: the person needs to hear
	// that the operator cannot run it at all.
	for _, user := range kc.AuthInfos {
		if user.Exec != nil || user.AuthProvider != nil {
			return nil, refused(check(kc))
		}
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
	return &Exported{Kubeconfig: data, Server: server}, nil
}

// inlineTokenFiles reads each user's tokenFile into its token, which
// FlattenConfig leaves alone.
func inlineTokenFiles(kc *clientcmdapi.Config) error {
	for name, user := range kc.AuthInfos {
		if user.TokenFile == "" {
			continue
		}
		if user.Token != "" {
			// client-go prefers the token; the file is then unused.
			user.TokenFile = ""
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
