// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// trust is the set of namespaces whose VidraResources may act with the
// operator's own identity (--trusted-namespaces).
type trust struct {
	all        bool
	namespaces map[string]bool
}

// AllNamespaces in TrustedNamespaces trusts every namespace: the behaviour
// of a single-tenant cluster, where whoever may create a VidraResource may
// act as the operator.
const AllNamespaces = "*"

// newTrust trusts the namespaces listed, or the operator's own namespace
// when none are: like Argo CD, which trusts only its own namespace unless
// told otherwise.
func newTrust(namespaces []string, own string) trust {
	t := trust{namespaces: map[string]bool{}}
	for _, ns := range namespaces {
		ns = strings.TrimSpace(ns)
		switch ns {
		case "":
		case AllNamespaces:
			t.all = true
		default:
			t.namespaces[ns] = true
		}
	}
	if !t.all && len(t.namespaces) == 0 && own != "" {
		t.namespaces[own] = true
	}
	return t
}

func (t trust) trusts(namespace string) bool { return t.all || t.namespaces[namespace] }

// String lists the trusted namespaces, for messages.
func (t trust) String() string {
	if t.all {
		return AllNamespaces
	}
	return strings.Join(slices.Sorted(maps.Keys(t.namespaces)), ",")
}

// actingServiceAccount decides who acts for a VidraResource of namespace:
// the ServiceAccount it names; else the operator's default ServiceAccount;
// else, in a trusted namespace only, the operator itself (""). Anywhere
// else the resource may not act at all: it would write with the operator's
// rights, which are meant for its administrators' resources.
func actingServiceAccount(namespace, named, defaultSA string, t trust) (string, error) {
	sa := named
	if sa == "" {
		sa = defaultSA
	}
	if sa != "" {
		// The CRD refuses such names already; an older CRD, or a client that
		// skips validation, must not turn "a:b" into the user of another
		// namespace's ServiceAccount.
		if errs := validation.IsDNS1123Subdomain(sa); len(errs) > 0 {
			return "", &refusedError{reason: v1alpha1.ReasonServiceAccountRequired,
				msg: fmt.Sprintf("spec.serviceAccountName %q is not a ServiceAccount name: %s", sa, strings.Join(errs, "; "))}
		}
		return sa, nil
	}
	if t.trusts(namespace) {
		return "", nil
	}
	return "", &refusedError{reason: v1alpha1.ReasonServiceAccountRequired, msg: fmt.Sprintf(
		"nothing applied: namespace %s is not trusted to act with the operator's identity, and the resource names no ServiceAccount; "+
			"set spec.serviceAccountName to a ServiceAccount of %s allowed to write these objects, "+
			"or run the operator with --default-service-account, "+
			"or add %s to the operator's --trusted-namespaces (now %s)", namespace, namespace, namespace, t)}
}

// refusedError is a destination or identity Vidra will not use for a
// resource: no retry can change that, only a change of the resource or of
// the operator's flags. The resource stalls with reason.
type refusedError struct {
	reason string
	msg    string
}

func (e *refusedError) Error() string { return e.msg }

// IsRefused reports whether err refuses the resource's identity outright,
// so that it never acted and has nothing to clean up with it.
func IsRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && r.reason == v1alpha1.ReasonServiceAccountRequired
}

// Failure maps an error of resolve to the condition reason it
// reports and whether a retry may fix it.
func Failure(err error) (reason string, retry bool) {
	var r *refusedError
	if errors.As(err, &r) {
		return r.reason, false
	}
	var f *forbiddenSecretError
	if errors.As(err, &f) {
		return v1alpha1.ReasonForbidden, true
	}
	return v1alpha1.ReasonDestinationError, true
}
