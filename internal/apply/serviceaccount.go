// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// serviceAccounts is the resource of ServiceAccounts.
var serviceAccounts = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}

// explainMissingServiceAccount replaces the Forbidden errors of a pass
// whose ServiceAccount does not exist with what is really wrong. The API
// server refuses every request of an impersonated ServiceAccount that does
// not exist as it refuses one without rights ("User ... cannot patch"),
// which sends a person looking for a missing Role rather than a typo in
// spec.serviceAccountName. It costs a read, as the operator, only when a
// write was refused.
func (e *Engine) explainMissingServiceAccount(ctx context.Context, pass *Pass) {
	forbidden := func(o *ObjectError) bool { return o.Reason == v1alpha1.ReasonForbidden }
	t := pass.Target
	if e.local == nil || t == nil || t.ServiceAccount == "" || t.Cluster != destination.LocalCluster || !slices.ContainsFunc(pass.Out.Errs, forbidden) {
		return
	}
	ns, name, _ := strings.Cut(t.ServiceAccount, "/")
	if _, err := e.local.Resource(serviceAccounts).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return
	}
	missing := &ObjectError{Index: -1, Reason: v1alpha1.ReasonServiceAccountNotFound, Retry: true,
		Err: fmt.Errorf("ServiceAccount %s does not exist, so every write as it is refused: create it and grant it the rights the manifest needs, or correct spec.serviceAccountName", t.ServiceAccount)}
	pass.Out.Errs = append([]*ObjectError{missing}, slices.DeleteFunc(pass.Out.Errs, forbidden)...)
}
