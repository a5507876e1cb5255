// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterconfig

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// mastersGroup is the group the API server lets do anything, before and
// whatever RBAC says.
const mastersGroup = "system:masters"

// Check is one question put to the destination's API server about the
// exported identity: may it Verb Resource of Group in every namespace?
type Check struct {
	Verb, Group, Resource string
}

// Power is a Check whose yes makes an identity one no destination needs:
// with it, whoever reads the Secret owns the cluster. A destination needs
// to list, watch and write the objects its resources deploy, and to
// impersonate ServiceAccounts when they name one; none of these.
type Power struct {
	Check
	// Risk says what the identity may then do.
	Risk string
}

// powers are the checks cluster add makes.
var powers = []Power{
	{Check{"*", "*", "*"}, "may do anything in every namespace (verb * on every resource): cluster-admin"},
	{Check{"escalate", "rbac.authorization.k8s.io", "clusterroles"}, "may grant itself any permission (escalate clusterroles)"},
	{Check{"bind", "rbac.authorization.k8s.io", "clusterroles"}, "may bind any ClusterRole, cluster-admin included, to anyone (bind clusterroles)"},
	{Check{"impersonate", "", "users"}, "may act as any user (impersonate users)"},
	{Check{"impersonate", "", "groups"}, "may act as any group, system:masters included (impersonate groups)"},
}

// Identity is what the destination's API server says of the exported
// identity.
type Identity struct {
	// User and Groups are the SelfSubjectReview's answer; empty when the
	// server does not serve it.
	User   string
	Groups []string
	// Allowed holds the Checks of powers the server allows.
	Allowed map[Check]bool
}

// Review asks the destination's API server, as the exported identity,
// who it is and which of powers it has.
func Review(ctx context.Context, c kubernetes.Interface) (*Identity, error) {
	id := &Identity{Allowed: map[Check]bool{}}
	// Who it is says system:masters, which RBAC does not show; a server
	// that does not serve it still answers the access reviews.
	if r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		id.User, id.Groups = r.Status.UserInfo.Username, r.Status.UserInfo.Groups
	}
	for _, p := range powers {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: p.Verb, Group: p.Group, Resource: p.Resource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask whether it may %s %s: %w", p.Verb, p.Resource, err)
		}
		id.Allowed[p.Check] = r.Status.Allowed
	}
	return id, nil
}

// Risks names what id may do that a destination does not need, in the
// order of powers, system:masters first.
func (id *Identity) Risks() []string {
	var risks []string
	if slices.Contains(id.Groups, mastersGroup) {
		risks = append(risks, "is in group "+mastersGroup+", which the API server lets do anything whatever RBAC says")
	}
	for _, p := range powers {
		if id.Allowed[p.Check] {
			risks = append(risks, p.Risk)
		}
	}
	return risks
}

// Decision is what cluster add does with the identity of a context.
type Decision struct {
	// Refused, when set, stops cluster add before it writes anything.
	Refused error
	// Warning, when set, is printed before the Secret is written: the
	// person passed --yes over a risk.
	Warning string
}

// Decide says whether the identity of context contextName may go into a
// Secret of namespace: refused when the review failed (reviewErr) or
// found a risk, unless yes, which writes it with a warning.
func Decide(contextName, namespace string, id *Identity, reviewErr error, yes bool) Decision {
	if reviewErr != nil {
		msg := fmt.Sprintf("could not check what the identity of context %q may do on its cluster: %v", contextName, reviewErr)
		if yes {
			return Decision{Warning: "Warning: " + msg + "; writing it anyway (--yes)"}
		}
		return Decision{Refused: fmt.Errorf("%s; pass --yes to write it without the check", msg)}
	}
	risks := id.Risks()
	if len(risks) == 0 {
		return Decision{}
	}
	who := fmt.Sprintf("the identity of context %q", contextName)
	if id.User != "" {
		who += fmt.Sprintf(" (user %q", id.User)
		if len(id.Groups) > 0 {
			who += ", groups " + strings.Join(id.Groups, ", ")
		}
		who += ")"
	}
	msg := fmt.Sprintf("%s can do more than a destination needs:\n  - %s\n"+
		"The Secret would hand it to everyone who may read Secrets in namespace %s (the edit role, for one), "+
		"and to every VidraResource there.", who, strings.Join(risks, "\n  - "), namespace)
	if yes {
		return Decision{Warning: "Warning: " + msg + "\nWriting it anyway (--yes)."}
	}
	return Decision{Refused: fmt.Errorf("%s\n%s", msg, advice)}
}

// advice is what to use instead of a person's own identity.
const advice = "Use a ServiceAccount of that cluster bound to a Role that allows what the resources deploy " +
	"(docs/remote-destinations.md), for example:\n" +
	"  kubectl --context CONTEXT create serviceaccount vidra -n vidra-remote\n" +
	"  kubectl --context CONTEXT create rolebinding vidra --clusterrole edit --serviceaccount vidra-remote:vidra -n APP-NAMESPACE\n" +
	"  kubectl config set-credentials vidra --token \"$(kubectl --context CONTEXT create token vidra -n vidra-remote --duration 8760h)\"\n" +
	"  kubectl config set-context vidra --cluster CLUSTER --user vidra\n" +
	"then add --context vidra; or pass --yes to write this identity anyway."
