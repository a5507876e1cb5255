// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
)

// reviewer answers SelfSubjectAccessReviews from allowed (verb to answer),
// or with err, and records what it was asked.
func reviewer(t *testing.T, allowed map[string]bool, err error) (*dynamicfake.FakeDynamicClient, *[]authorizationv1.ResourceAttributes) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	var asked []authorizationv1.ResourceAttributes
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
		var review authorizationv1.SelfSubjectAccessReview
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &review); err != nil {
			t.Fatal(err)
		}
		asked = append(asked, *review.Spec.ResourceAttributes)
		if err != nil {
			return true, nil, err
		}
		review.Status.Allowed = allowed[review.Spec.ResourceAttributes.Verb]
		obj, convErr := runtime.DefaultUnstructuredConverter.ToUnstructured(&review)
		if convErr != nil {
			t.Fatal(convErr)
		}
		return true, &unstructured.Unstructured{Object: obj}, nil
	})
	return client, &asked
}

func TestMayManageAsksForPatchAndDeleteOfThatObject(t *testing.T) {
	rolebindings := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	for _, tc := range []struct {
		name    string
		allowed map[string]bool
		err     error
		denied  string
		fails   bool
	}{
		{name: "may patch and delete", allowed: map[string]bool{"patch": true, "delete": true}},
		{name: "may only read", allowed: map[string]bool{"get": true}, denied: "may not patch it"},
		{name: "may patch, not delete", allowed: map[string]bool{"patch": true}, denied: "may not delete it"},
		{name: "may not review", err: apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("no")), denied: "may not create selfsubjectaccessreviews"},
		{name: "no answer", err: apierrors.NewServiceUnavailable("down"), fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, asked := reviewer(t, tc.allowed, tc.err)
			denied, err := mayManage(t.Context(), client, rolebindings, "victim", "temp-access")
			if tc.fails != (err != nil) {
				t.Fatalf("err = %v, want an error: %v", err, tc.fails)
			}
			if tc.denied == "" && denied != "" || !strings.Contains(denied, tc.denied) {
				t.Errorf("denied = %q, want %q", denied, tc.denied)
			}
			for _, a := range *asked {
				if a.Group != rolebindings.Group || a.Resource != "rolebindings" || a.Namespace != "victim" || a.Name != "temp-access" || a.Subresource != "" {
					t.Errorf("asked about another object: %+v", a)
				}
			}
			if tc.denied == "" && !tc.fails && (len(*asked) != 2 || (*asked)[0].Verb != "patch" || (*asked)[1].Verb != "delete") {
				t.Errorf("asked %+v, want patch then delete", *asked)
			}
		})
	}
}

// A claim is made with the identity its resource had then; once the
// resource names another ServiceAccount or destination, the claim says
// nothing of what the resource may do, and is left out until its next
// reconcile records it again.
func TestClaimantsLeaveOutClaimsOfAnEarlierIdentity(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e := New(Options{Owners: listers.NewVidraResourceLister(indexer)})
	key := ObjectKey{kind: "ConfigMap", namespace: "app", name: "shared"}
	claimant := func(name, sa string, uid types.UID) *v1alpha1.VidraResource {
		vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: uid}}
		vr.Spec.ServiceAccountName = sa
		if err := indexer.Add(vr); err != nil {
			t.Fatal(err)
		}
		client, _ := reviewer(t, nil, nil)
		e.states[cache.MetaObjectToName(vr)] = &resourceState{uid: uid, claims: map[ObjectKey]schema.GroupVersionResource{key: {Version: "v1", Resource: "configmaps"}},
			claimsAs: claimIdentity{client: client, serviceAccount: "app/" + sa, spec: identitySpec{serviceAccountName: sa}}}
		return vr
	}
	claimant("b-same", "deployer", "uid-b")
	changed := claimant("a-changed", "deployer", "uid-a")
	changed = changed.DeepCopy()
	changed.Spec.ServiceAccountName = "reader"
	if err := indexer.Update(changed); err != nil {
		t.Fatal(err)
	}
	got := e.claimants("", key, "uid-owner")
	if len(got) != 1 || got[0].vr.Name != "b-same" {
		names := []string{}
		for _, c := range got {
			names = append(names, c.vr.Name)
		}
		t.Fatalf("claimants = %v, want [b-same]", names)
	}
	if got := e.claimants("", key, "uid-b"); len(got) != 0 {
		t.Errorf("the owner itself counts as a claimant: %v", got)
	}
}

// A claim keeps the resource its claimant declares the object as, whose
// rights a handover checks: an Event declared in events.k8s.io is the
// core Event the releasing resource holds, and a role may grant either
// group alone.
func TestAClaimKeepsTheResourceItsClaimantDeclares(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e := New(Options{Owners: listers.NewVidraResourceLister(indexer)})
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "heir", UID: "uid-heir"}}
	if err := indexer.Add(vr); err != nil {
		t.Fatal(err)
	}
	client, _ := reviewer(t, nil, nil)
	events := schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	declared := &unstructured.Unstructured{}
	declared.SetAPIVersion("events.k8s.io/v1")
	declared.SetKind("Event")
	declared.SetNamespace("app")
	declared.SetName("e")
	pass := &Pass{VR: vr, Target: &destination.Target{Client: client}, st: e.stateFor(cache.MetaObjectToName(vr), vr.UID)}
	pass.claims = map[ObjectKey]schema.GroupVersionResource{keyOf(declared): events}
	e.setClaims(pass)
	held := inventoryKey(v1alpha1.ManagedResource{APIVersion: "v1", Kind: "Event", Namespace: "app", Name: "e"})
	got := e.claimants("", held, "uid-owner")
	if len(got) != 1 || got[0].gvr != events {
		t.Fatalf("claimants of the core Event %v, want heir's claim as %v", got, events)
	}
}

// Of the resources that declare an object let go, those of the namespace
// letting it go come first, then those of the object's own namespace, then
// the others, each by name: resources named to sort first, in a namespace
// that may only read the object, cannot crowd its heirs out of the few
// reviews made.
func TestClaimantsOfTheReleasersAndTheObjectsNamespaceComeFirst(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e := New(Options{Owners: listers.NewVidraResourceLister(indexer)})
	key := ObjectKey{kind: "ConfigMap", namespace: "app", name: "shared"}
	for _, name := range []string{"aaa/a", "aaa/b", "aaa/c", "aaa/d", "zzz/heir", "app/tenant", "platform/next"} {
		ns, n, _ := strings.Cut(name, "/")
		vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, UID: types.UID(name)}}
		if err := indexer.Add(vr); err != nil {
			t.Fatal(err)
		}
		client, _ := reviewer(t, nil, nil)
		e.states[cache.MetaObjectToName(vr)] = &resourceState{uid: vr.UID, claims: map[ObjectKey]schema.GroupVersionResource{key: {Version: "v1", Resource: "configmaps"}},
			claimsAs: claimIdentity{client: client, serviceAccount: ns + "/deployer", spec: identitySpec{}}}
	}
	var got []string
	for _, c := range e.claimants("", key, "uid-owner", "platform", "app") {
		got = append(got, c.vr.Namespace+"/"+c.vr.Name)
	}
	want := []string{"platform/next", "app/tenant", "aaa/a", "aaa/b", "aaa/c", "aaa/d", "zzz/heir"}
	if !slices.Equal(got, want) {
		t.Errorf("claimants %v, want %v", got, want)
	}
}

// firstHeirCase is one row of TestFirstHeirReviewsEachIdentityOnceWithinTheCaps.
type firstHeirCase struct {
	name       string
	identities []string
	allowed    string
	fail       string
	// reviewed are the identities reviewed, in order; refused how many
	// claimants were told; heir the name of the one found.
	reviewed  []string
	refused   int
	heir      string
	truncated bool
	fails     bool
}

// firstHeirCases are the identities firstHeir reviews, named by their
// ServiceAccounts, the resource of the i-th being ri.
func firstHeirCases() []firstHeirCase {
	many := func(n int, sa func(int) string) []string {
		var ids []string
		for i := range n {
			ids = append(ids, sa(i))
		}
		return ids
	}
	return []firstHeirCase{
		{name: "an identity's resources share its answer", identities: []string{"a", "a", "a", "b"}, allowed: "b",
			reviewed: []string{"a", "b"}, refused: 3, heir: "r3"},
		{name: "the first that may wins", identities: []string{"a", "b", "c"}, allowed: "b",
			reviewed: []string{"a", "b"}, refused: 1, heir: "r1"},
		{name: "none may", identities: []string{"a", "b", "a"},
			reviewed: []string{"a", "b"}, refused: 3},
		{name: "four identities at most", identities: many(10, func(i int) string { return fmt.Sprint("sa", i) }), allowed: "sa9",
			reviewed: []string{"sa0", "sa1", "sa2", "sa3"}, refused: 4, truncated: true},
		{name: "a seen identity past the fourth is told", identities: []string{"a", "b", "c", "d", "a", "e", "a"}, allowed: "e",
			reviewed: []string{"a", "b", "c", "d"}, refused: 5, truncated: true},
		{name: "sixteen resources at most", identities: append(many(20, func(int) string { return "a" }), "b"), allowed: "b",
			reviewed: []string{"a"}, refused: maxClaimantsConsidered, truncated: true},
		{name: "a failed review stops", identities: []string{"a", "b", "c"}, allowed: "c", fail: "b",
			reviewed: []string{"a", "b"}, refused: 1, heir: "r1", fails: true},
	}
}

// firstHeir reviews each identity once, whatever the number of its
// resources, and stops at maxIdentitiesReviewed identities and
// maxClaimantsConsidered resources: a tenant declaring an object from many
// resources, or as many ServiceAccounts, costs a few reviews.
func TestFirstHeirReviewsEachIdentityOnceWithinTheCaps(t *testing.T) {
	claims := func(identities ...string) []claim {
		var cs []claim
		for i, sa := range identities {
			cs = append(cs, claim{
				vr: &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("r", i)}},
				as: claimIdentity{serviceAccount: sa},
			})
		}
		return cs
	}
	for _, tc := range firstHeirCases() {
		t.Run(tc.name, func(t *testing.T) {
			var reviewed []string
			heir, refused, truncated, err := firstHeir(claims(tc.identities...), func(c claim) (string, string, error) {
				reviewed = append(reviewed, c.as.serviceAccount)
				switch c.as.serviceAccount {
				case tc.fail:
					return "", "", errors.New("no answer")
				case tc.allowed:
					return "", grantVerbs, nil
				}
				return "may not patch it", grantVerbs, nil
			})
			if (err != nil) != tc.fails {
				t.Fatalf("err = %v, want an error: %v", err, tc.fails)
			}
			if !slices.Equal(reviewed, tc.reviewed) {
				t.Errorf("reviewed %v, want %v", reviewed, tc.reviewed)
			}
			if len(refused) != tc.refused || truncated != tc.truncated {
				t.Errorf("%d refused, truncated %v; want %d, %v", len(refused), truncated, tc.refused, tc.truncated)
			}
			for i, r := range refused {
				if r.to.vr.Name != fmt.Sprint("r", i) || r.denied != "may not patch it" {
					t.Errorf("refusal %d told %s %q", i, r.to.vr.Name, r.denied)
				}
			}
			if got := ""; heir != nil || tc.heir != "" {
				if heir != nil {
					got = heir.vr.Name
				}
				if got != tc.heir {
					t.Errorf("heir %q, want %q", got, tc.heir)
				}
			}
		})
	}
}

// A claim speaks for the spec it was recorded under: a resource whose
// manifest changed since may no longer declare the object, and one whose
// reconciles stop early (a dependency that never becomes Ready) would never
// record its claims again. It gets the object only once a reconcile of its
// new spec claims it.
func TestAClaimOfAnEarlierGenerationIsLeftOut(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e := New(Options{Owners: listers.NewVidraResourceLister(indexer)})
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "heir", UID: "uid-heir", Generation: 1}}
	if err := indexer.Add(vr); err != nil {
		t.Fatal(err)
	}
	client, _ := reviewer(t, nil, nil)
	key := ObjectKey{kind: "ConfigMap", namespace: "app", name: "shared"}
	claim := func(vr *v1alpha1.VidraResource) {
		pass := &Pass{VR: vr, Target: &destination.Target{Client: client}, st: e.stateFor(cache.MetaObjectToName(vr), vr.UID)}
		pass.claims = map[ObjectKey]schema.GroupVersionResource{key: {Version: "v1", Resource: "configmaps"}}
		e.setClaims(pass)
	}
	claim(vr)
	if got := e.claimants("", key, "uid-owner"); len(got) != 1 {
		t.Fatalf("claimants %v, want the heir's claim", got)
	}
	changed := vr.DeepCopy()
	changed.Generation = 2
	changed.Spec.Manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"
	changed.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "never-ready"}}
	if err := indexer.Update(changed); err != nil {
		t.Fatal(err)
	}
	if got := e.claimants("", key, "uid-owner"); len(got) != 0 {
		t.Errorf("a claim recorded at generation 1 honoured at generation 2: %d claimants", len(got))
	}
	claim(changed)
	if got := e.claimants("", key, "uid-owner"); len(got) != 1 {
		t.Errorf("claimants %v, want the claim recorded again at generation 2", got)
	}
}

// One identity may hold an object in one API group and not the other (an
// Event is one object in two): its claimants declaring the object in
// different groups are reviewed each, not given the first one's answer.
func TestFirstHeirReviewsAnIdentityOncePerResource(t *testing.T) {
	core := schema.GroupVersionResource{Version: "v1", Resource: "events"}
	events := schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	claims := []claim{
		{vr: &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "as-core"}}, as: claimIdentity{serviceAccount: "ns/deployer"}, gvr: core},
		{vr: &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "as-events"}}, as: claimIdentity{serviceAccount: "ns/deployer"}, gvr: events},
		{vr: &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "as-core-too"}}, as: claimIdentity{serviceAccount: "ns/deployer"}, gvr: core},
	}
	var asked []schema.GroupVersionResource
	heir, refused, _, err := firstHeir(claims, func(c claim) (string, string, error) {
		asked = append(asked, c.gvr)
		if c.gvr == core {
			return "may not patch it", grantVerbs, nil
		}
		return "", "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if heir == nil || heir.vr.Name != "as-events" {
		t.Fatalf("heir %v, want as-events, whose group the identity may manage; asked %v", heir, asked)
	}
	if len(refused) != 1 || len(asked) != 2 {
		t.Errorf("refused %d, asked %v: want one refusal and one review per group", len(refused), asked)
	}
}
