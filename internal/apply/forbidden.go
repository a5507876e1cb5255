// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// forbiddenWrite reads the API server's refusal of a request by RBAC: who,
// which verb, which resource of which group, and where.
var forbiddenWrite = regexp.MustCompile(`User "([^"]+)" cannot ([a-z]+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)"| at the cluster scope)`)

// forbidden wraps err, the API server's refusal of a write by RBAC, with
// what Vidra needs of the identity the request was made as: every verb it
// uses on the objects of a manifest (get to read one it has not cached,
// create and patch to apply, delete to prune), and where. It names the
// choice, not a command to paste: the refusal may be RBAC doing its job,
// a tenant aiming at what is not theirs. A refusal it cannot read (a
// namespace being deleted, an admission webhook's) is returned as it is.
// clusterScoped is the object's scope: RBAC names a Namespace's own name as
// the namespace of a request for it, but only a ClusterRole can grant its
// creation.
func forbidden(err error, clusterScoped bool) error {
	if hint := ForbiddenHint(err, clusterScoped); hint != "" {
		return fmt.Errorf("%w: %s", err, hint)
	}
	return err
}

// ForbiddenHint is what forbidden adds to err, or "" when err is not a
// refusal by RBAC it can read.
func ForbiddenHint(err error, clusterScoped bool) string {
	if !apierrors.IsForbidden(err) {
		return ""
	}
	m := forbiddenWrite.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	user, resource, group, namespace := m[1], m[3], m[4], m[5]
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		// A subresource: the grant is on the resource.
		resource = resource[:i]
	}
	if group != "" {
		resource += "." + group
	}
	who := fmt.Sprintf("user %q", user)
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			who = "ServiceAccount " + ns + "/" + name
		}
	}
	where := "cluster-wide (a ClusterRole and a ClusterRoleBinding)"
	if namespace != "" && !clusterScoped {
		where = fmt.Sprintf("in namespace %s (a Role and a RoleBinding there)", namespace)
	}
	return fmt.Sprintf("Vidra writes it as %s, which needs get, create, patch and delete on %s %s if this resource is to manage it; else leave the object out of the manifest",
		who, resource, where)
}
