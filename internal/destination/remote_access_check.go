// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// accessRecheck is how long a ServiceAccount's right to read a kubeconfig
// Secret, once checked, is trusted without asking again; a change of the
// Secret asks at once. It bounds how long a revoked right still works.
const accessRecheck = 10 * time.Minute

// accessKey is one identity's read of one Secret.
type accessKey struct {
	user   string
	secret cache.ObjectName
}

// accessCheck is the last successful check of an accessKey.
type accessCheck struct {
	rv string
	at time.Time
}

// checkAccess makes sure that ServiceAccount sa of namespace may get the
// Secret described by meta, by getting it (metadata only) as sa: the
// operator reads every Secret it is given, and must not read one for a
// tenant who could not. A success is remembered for the Secret's version,
// for accessRecheck at most, so that it costs one request per Secret
// change, not one per reconcile; of the maxAccessChecks remembered, the
// least recently used gives way, and is checked again when next needed.
func (r *remotes) checkAccess(ctx context.Context, namespace, sa string, meta *metav1.PartialObjectMetadata) error {
	if sa == "" {
		return nil
	}
	user := "system:serviceaccount:" + namespace + ":" + sa
	ak := accessKey{user: user, secret: cache.MetaObjectToName(meta)}
	now := r.clock.Now()
	r.mu.Lock()
	ok := r.access.allowed(ak, meta.ResourceVersion, now)
	r.mu.Unlock()
	if ok {
		return nil
	}
	as, err := r.local.as(namespace, sa)
	if err != nil {
		return err
	}
	_, err = as.meta.Resource(secretsResource).Namespace(meta.Namespace).Get(ctx, meta.Name, metav1.GetOptions{})
	r.mu.Lock()
	if err == nil {
		r.access.add(ak, accessCheck{rv: meta.ResourceVersion, at: now}, now)
	} else {
		// An outdated check that failed again is of no more use.
		r.access.remove(ak)
	}
	r.mu.Unlock()
	switch {
	case apierrors.IsForbidden(err):
		return &forbiddenSecretError{msg: fmt.Sprintf(
			"ServiceAccount %s/%s may not get Secret %s/%s named by destination.kubeconfigSecretRef, so Vidra does not read it either: "+
				"grant it get on that Secret (a Role and RoleBinding in %s), or name a Secret it may read", namespace, sa, meta.Namespace, meta.Name, meta.Namespace)}
	case apierrors.IsNotFound(err):
		return &secretNotFoundError{msg: fmt.Sprintf("Secret %s/%s named by destination.kubeconfigSecretRef does not exist", meta.Namespace, meta.Name)}
	case err != nil:
		return fmt.Errorf("check that ServiceAccount %s/%s may get Secret %s/%s: %w", namespace, sa, meta.Namespace, meta.Name, err)
	}
	return nil
}
