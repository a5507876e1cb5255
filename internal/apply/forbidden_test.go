// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestForbiddenSaysWhatTheIdentityNeeds(t *testing.T) {
	tests := []struct {
		name string
		gr   schema.GroupResource
		msg  string
		want string
	}{{
		name: "a tenant's ServiceAccount, another namespace",
		gr:   schema.GroupResource{Resource: "configmaps"},
		msg:  `User "system:serviceaccount:team-a:deployer" cannot patch resource "configmaps" in API group "" in the namespace "other"`,
		want: `: Vidra writes it as ServiceAccount team-a/deployer, which needs get, create, patch and delete on configmaps in namespace other (a Role and a RoleBinding there) if this resource is to manage it; else leave the object out of the manifest`,
	}, {
		name: "a cluster-scoped kind of a group",
		gr:   schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		msg:  `User "system:serviceaccount:team-a:deployer" cannot create resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`,
		want: `: Vidra writes it as ServiceAccount team-a/deployer, which needs get, create, patch and delete on clusterroles.rbac.authorization.k8s.io cluster-wide (a ClusterRole and a ClusterRoleBinding) if`,
	}, {
		name: "a Namespace, which RBAC places in itself",
		gr:   schema.GroupResource{Resource: "namespaces"},
		msg:  `User "system:serviceaccount:team-a:deployer" cannot patch resource "namespaces" in API group "" in the namespace "grab"`,
		want: `: Vidra writes it as ServiceAccount team-a/deployer, which needs get, create, patch and delete on namespaces cluster-wide (a ClusterRole and a ClusterRoleBinding) if`,
	}, {
		name: "a user, a subresource",
		gr:   schema.GroupResource{Group: "apps", Resource: "deployments"},
		msg:  `User "admin@example.com" cannot patch resource "deployments/scale" in API group "apps" in the namespace "web"`,
		want: `: Vidra writes it as user "admin@example.com", which needs get, create, patch and delete on deployments.apps in namespace web`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apiErr := apierrors.NewForbidden(tt.gr, "x", errors.New(tt.msg))
			p := schemaTestPlanned(t, "apps")
			if tt.gr.Resource != "configmaps" && tt.gr.Resource != "deployments" {
				p.obj.SetNamespace("")
			}
			oe := classify(p, apiErr)
			if oe.Reason != v1alpha1.ReasonForbidden || !oe.Retry || !errors.Is(oe, apiErr) {
				t.Errorf("reason %s, retry %v, unwraps %v; want Forbidden, retried, the API error", oe.Reason, oe.Retry, errors.Is(oe, apiErr))
			}
			msg := oe.Error()
			if !strings.Contains(msg, tt.msg) || !strings.Contains(msg, tt.want) {
				t.Errorf("message\n  %q\nlacks the API server's words or\n  %q", msg, tt.want)
			}
		})
	}
	// A refusal that is not RBAC's is left as it is.
	other := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("unable to create new content in namespace web because it is being terminated"))
	if oe := classify(schemaTestPlanned(t, "apps"), other); oe.Err != other {
		t.Errorf("a namespace being deleted: %v, want the API error unchanged", oe.Err)
	}
}
