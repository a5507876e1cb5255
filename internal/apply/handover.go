// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// selfSubjectAccessReviews is where an identity asks what it may do. Every
// authenticated user may create them (ClusterRole system:basic-user), so the
// review needs no right of the operator's beyond impersonating the
// ServiceAccount, which it has, and works as well on a remote cluster.
var selfSubjectAccessReviews = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}

// handoverVerbs are what the new owner of an object must be allowed on it:
// patch for its server-side applies, releases and hand-overs, delete for its
// prunes. Declaring an object takes no more than reading it, so without this
// check an identity that may only read an object could keep it from ever
// being deleted, by declaring it and waiting for its owner to let it go.
var handoverVerbs = []string{"patch", "delete"}

// mayManage asks the API server, as the identity of client, whether it may
// patch and delete the object name of gvr in namespace. It returns "" when
// it may, else what it may not, for messages; an error only when the
// answer is not known, to be tried again.
func mayManage(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string) (string, error) {
	for _, verb := range handoverVerbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gvr.Group, Resource: gvr.Resource, Namespace: namespace, Name: name, Verb: verb},
		}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(review)
		if err != nil {
			return "", err
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"))
		resp, err := client.Resource(selfSubjectAccessReviews).Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			// An identity whose rights cannot be shown gets nothing on trust.
			return "may not create selfsubjectaccessreviews, so whether it may manage it is not known", nil
		}
		if err != nil {
			return "", fmt.Errorf("review %s of %s: %w", verb, describeObject(gvr, namespace, name), err)
		}
		var got authorizationv1.SelfSubjectAccessReview
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(resp.Object, &got); err != nil {
			return "", fmt.Errorf("review %s of %s: read the answer: %w", verb, describeObject(gvr, namespace, name), err)
		}
		if !got.Status.Allowed || got.Status.Denied {
			return "may not " + verb + " it", nil
		}
	}
	return "", nil
}

// escalationChecked reports the kinds whose writes the API server checks
// against the writer's own rights, beyond the verbs mayManage asks about:
// whoever changes a Role or ClusterRole, even only its labels, must hold
// its rules or be allowed to escalate, and whoever changes a binding must
// be allowed to bind its role or hold its rights. An identity allowed to
// patch and delete such an object may still be unable to write it, and the
// hand-over's own patch is the operator's: handed over, a RoleBinding the
// platform revoked would stay, granting what its new owner could never
// have granted.
func escalationChecked(gvr schema.GroupVersionResource) bool {
	return gvr.Group == rbacv1.GroupName
}

// mayWrite asks the API server for a dry run of patch, the hand-over's, as
// the identity of client. It returns "" when the server would take it,
// else what the identity may not do, for messages; an error only when the
// answer is not known, to be tried again.
func mayWrite(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string, patch []byte) (string, error) {
	_, err := client.Resource(gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: v1alpha1.HandoverFieldManager})
	switch {
	case err == nil:
		return "", nil
	case apierrors.IsForbidden(err):
		return "may not write it (the API server refused, as that identity, a dry run of the hand-over: it must hold what the object grants, or be allowed to bind or escalate to it)", nil
	}
	return "", fmt.Errorf("dry run of the hand-over of %s: %w", describeObject(gvr, namespace, name), err)
}

func describeObject(gvr schema.GroupVersionResource, namespace, name string) string {
	what := gvr.GroupResource().String() + " " + name
	if namespace != "" {
		what += " in namespace " + namespace
	}
	return what
}

// handoverRefusal is a claimant an object was not handed over to, and why.
type handoverRefusal struct {
	to claim
	// denied says what its identity may not do (mayManage, mayWrite), and
	// grant what would let it.
	denied, grant string
}

// grantVerbs and grantEscalation are what a refused claimant's identity
// lacks, for the Event that tells it.
const (
	grantVerbs      = "patch and delete on it"
	grantEscalation = "what the object grants, or bind and escalate on its kind"
)

// handoverRefused tells the claimants of key that did not get it, and vr,
// which let it go, why and what became of the object instead: each such
// claimant records a Warning Event and is woken, so that its status shows
// at once what its identity may do with the object now.
func (e *Engine) handoverRefused(ctx context.Context, vr *v1alpha1.VidraResource, key ObjectKey, refused []handoverRefusal, outcome string) {
	for _, r := range refused {
		who := "the operator's identity"
		if r.to.as.serviceAccount != "" {
			who = "its ServiceAccount " + r.to.as.serviceAccount
		}
		klog.FromContext(ctx).Info("Not handing object over: the VidraResource that declares it may not manage it",
			"object", key.String(), "claimant", r.to.vr.Namespace+"/"+r.to.vr.Name, "identity", who, "denied", r.denied, "outcome", outcome)
		e.events.Event(r.to.vr, true, v1alpha1.ReasonHandoverRefused,
			"VidraResource %s/%s let go of %s, which this resource declares too, but it was not handed over here: %s %s; it was %s. Grant that identity %s for it to be handed over",
			vr.Namespace, vr.Name, key, who, r.denied, outcome, r.grant)
		e.events.Event(vr, false, v1alpha1.ReasonHandoverRefused, "Did not hand %s over to VidraResource %s/%s, which declares it too: %s %s; it was %s",
			key, r.to.vr.Namespace, r.to.vr.Name, who, r.denied, outcome)
		e.enqueue(cache.MetaObjectToName(r.to.vr))
	}
}

// outcomeOf describes what letting an object go did, for messages.
func outcomeOf(what letGoResult, vr *v1alpha1.VidraResource, to *v1alpha1.VidraResource) string {
	switch what {
	case handedOver:
		return "handed over to VidraResource " + to.Namespace + "/" + to.Name
	case deleted:
		return "deleted"
	case released, keptByAnnotation:
		return "released, without Vidra's marks"
	case pruneRefused:
		return "kept by VidraResource " + vr.Namespace + "/" + vr.Name + ", which may not prune it (" + v1alpha1.ReasonPruneRefused + ")"
	}
	return "left as it was"
}
