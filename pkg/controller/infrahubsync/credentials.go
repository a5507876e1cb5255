// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/infrahub"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// LegacyURLLabel is the label of the earlier operator's credentials
// Secrets: infrahub-api-url=<host of Infrahub>. Vidra honours it only for
// syncs of the trusted namespaces, and looks only there.
const LegacyURLLabel = "infrahub-api-url"

// maxSecretBytes bounds what one credentials or CA Secret may hold for
// Vidra to read it: a password, a token or a CA bundle are far smaller.
const maxSecretBytes = infrahub.MaxCABytes

// SecretReader reads a Secret as a ServiceAccount of its namespace, or as
// the operator when serviceAccount is "". Reading as the ServiceAccount is
// the access check: a tenant gets Vidra to read only what its
// ServiceAccount may read itself.
type SecretReader interface {
	Get(ctx context.Context, namespace, name, serviceAccount string) (*corev1.Secret, error)
	// List lists the Secrets of namespace with a label, as the operator;
	// only the earlier operator's lookup, for trusted namespaces, uses it.
	List(ctx context.Context, namespace, selector string) ([]corev1.Secret, error)
}

// NewSecretReader reads as the operator through kube, and as a
// ServiceAccount through clients impersonating it, built from config.
func NewSecretReader(kube kubernetes.Interface, config *rest.Config) SecretReader {
	return &secretReader{kube: kube, config: config}
}

type secretReader struct {
	kube   kubernetes.Interface
	config *rest.Config
}

func (r *secretReader) Get(ctx context.Context, namespace, name, sa string) (*corev1.Secret, error) {
	client := r.kube
	if sa != "" {
		// Secrets are read when a sync's source changes or Infrahub refuses
		// its credentials, not on every poll: a client per read is cheap
		// enough, and holds no ServiceAccount's rights longer than a read.
		cfg := rest.CopyConfig(r.config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + sa}
		var err error
		if client, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	return client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r *secretReader) List(ctx context.Context, namespace, selector string) ([]corev1.Secret, error) {
	list, err := r.kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// credentialsError is a Secret that cannot be used; a retry does not help
// until someone changes it (or the rights on it).
type credentialsError struct{ msg string }

func (e *credentialsError) Error() string { return e.msg }

// readSource reads what the sync's source needs from Secrets, acting as
// sa ("" for the operator, in a trusted namespace only).
func (c *Controller) readSource(ctx context.Context, sync *v1alpha1.InfrahubSync, sa string, trusted bool) (SourceRequest, error) {
	src := sync.Spec.Source
	req := SourceRequest{URL: src.InfrahubAPIURL}
	switch {
	case src.CredentialsSecretRef != nil:
		s, err := c.readSecret(ctx, sync, src.CredentialsSecretRef.Name, sa, "spec.source.credentialsSecretRef")
		if err != nil {
			return req, err
		}
		if req.Credentials, err = credentialsOf(s); err != nil {
			return req, err
		}
	case trusted:
		creds, err := c.legacyCredentials(ctx, sync)
		if err != nil {
			return req, err
		}
		req.Credentials = creds
	}
	if ref := src.CASecretRef; ref != nil {
		s, err := c.readSecret(ctx, sync, ref.Name, sa, "spec.source.caSecretRef")
		if err != nil {
			return req, err
		}
		key := ref.Key
		if key == "" {
			key = "ca.crt"
		}
		pem, ok := s.Data[key]
		if !ok || len(pem) == 0 {
			return req, &credentialsError{msg: fmt.Sprintf("Secret %s/%s named by spec.source.caSecretRef has no key %q", sync.Namespace, ref.Name, key)}
		}
		req.CAPEM = pem
	}
	return req, nil
}

func (c *Controller) readSecret(ctx context.Context, sync *v1alpha1.InfrahubSync, name, sa, field string) (*corev1.Secret, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := c.secrets.Get(ctx, sync.Namespace, name, sa)
	switch {
	case apierrors.IsForbidden(err):
		return nil, &credentialsError{msg: fmt.Sprintf(
			"ServiceAccount %s/%s may not get Secret %s/%s named by %s, so Vidra does not read it either: grant it get on that Secret (a Role and RoleBinding in %s)",
			sync.Namespace, sa, sync.Namespace, name, field, sync.Namespace)}
	case apierrors.IsNotFound(err):
		return nil, &credentialsError{msg: fmt.Sprintf("Secret %s/%s named by %s does not exist", sync.Namespace, name, field)}
	case err != nil:
		return nil, fmt.Errorf("read Secret %s/%s named by %s: %w", sync.Namespace, name, field, err)
	}
	size := 0
	for _, v := range s.Data {
		size += len(v)
	}
	if size > maxSecretBytes {
		return nil, &credentialsError{msg: fmt.Sprintf("Secret %s/%s named by %s holds %d bytes, more than the %d Vidra reads", sync.Namespace, name, field, size, maxSecretBytes)}
	}
	return s, nil
}

// credentialsOf takes username and password, or token, from s.
func credentialsOf(s *corev1.Secret) (infrahub.Credentials, error) {
	cr := infrahub.Credentials{
		Username: strings.TrimSpace(string(s.Data["username"])),
		Password: string(s.Data["password"]),
		Token:    strings.TrimSpace(string(s.Data["token"])),
	}
	if cr.Token == "" && (cr.Username == "" || cr.Password == "") {
		return cr, &credentialsError{msg: fmt.Sprintf("Secret %s/%s holds neither token nor both username and password", s.Namespace, s.Name)}
	}
	return cr, nil
}

// legacyCredentials finds the earlier operator's Secret for the sync's
// Infrahub: labelled infrahub-api-url=<host>, in a trusted namespace (the
// sync's own first). None found means anonymous, which Infrahub refuses for
// queries: its answer says so.
func (c *Controller) legacyCredentials(ctx context.Context, sync *v1alpha1.InfrahubSync) (infrahub.Credentials, error) {
	u, err := url.Parse(sync.Spec.Source.InfrahubAPIURL)
	if err != nil || u.Hostname() == "" {
		return infrahub.Credentials{}, nil
	}
	host := u.Hostname()
	if len(host) > 63 || strings.ContainsAny(host, ":%") {
		return infrahub.Credentials{}, nil
	}
	namespaces := []string{sync.Namespace}
	for _, ns := range c.opts.TrustedNamespaces {
		if ns != "*" && ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if !slices.Contains(namespaces, c.opts.Namespace) && c.opts.Namespace != "" {
		namespaces = append(namespaces, c.opts.Namespace)
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	for _, ns := range namespaces {
		list, err := c.secrets.List(ctx, ns, LegacyURLLabel+"="+host)
		if err != nil {
			return infrahub.Credentials{}, fmt.Errorf("list Secrets labelled %s=%s in %s: %w", LegacyURLLabel, host, ns, err)
		}
		slices.SortFunc(list, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
		for i := range list {
			if cr, err := credentialsOf(&list[i]); err == nil {
				return cr, nil
			}
		}
	}
	return infrahub.Credentials{}, nil
}

func isCredentialsError(err error) bool {
	var ce *credentialsError
	return errors.As(err, &ce)
}
