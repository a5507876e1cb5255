// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

const (
	id1 = "18a0c0de-0001-4000-8000-000000000001"
	id2 = "18a0c0de-0002-4000-8000-000000000002"
)

// Two artifacts become two Ready VidraResources and their objects; a
// changed artifact changes its own, and nothing else; a poll in which
// nothing changed costs one query and no write; an artifact that leaves
// Infrahub takes its resource and objects with it.
func TestArtifactsBecomeVidraResourcesAndFollowInfrahub(t *testing.T) {
	ns := namespace(t, "ihs-apply")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "one", "v1"))
	s.SetArtifact("main", configMapArtifact(id2, "two", "v1"))
	createSync(t, ns, "devices", s)

	for _, id := range []string{id1, id2} {
		testenv.WaitVR(t, vidra, ns, id, "became Ready", testenv.HasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled))
	}
	waitConfigMap(t, ns, "one", "v1")
	waitConfigMap(t, ns, "two", "v1")
	sync := waitSync(t, ns, "devices", "became Ready", syncReady)
	if sync.Status.ArtifactCount != 2 || sync.Status.SyncState != v1alpha1.SyncStateSucceeded {
		t.Errorf("status = %d artifacts, %s; want 2, Succeeded", sync.Status.ArtifactCount, sync.Status.SyncState)
	}
	vr1, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), id1, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(vr1); ref == nil || ref.UID != sync.UID || vr1.Labels[v1alpha1.SyncNameLabel] != "devices" {
		t.Errorf("VidraResource %s is not marked as the sync's: owner %+v, labels %v", id1, ref, vr1.Labels)
	}

	t.Log("a changed artifact: its resource and object change, the other's stay")
	before := resourceVersions(t, ns, "devices")
	s.SetArtifact("main", configMapArtifact(id1, "one", "v2"))
	waitConfigMap(t, ns, "one", "v2")
	after := resourceVersions(t, ns, "devices")
	if after[id2] != before[id2] {
		t.Errorf("VidraResource %s was written (resourceVersion %s → %s) though its artifact did not change", id2, before[id2], after[id2])
	}
	waitSync(t, ns, "devices", "reported the change", func(s *v1alpha1.InfrahubSync) bool { return syncReady(s) && s.Status.LastSyncTime != nil })

	t.Log("an unchanged poll: one query, no download, no Kubernetes write")
	// Two passes make sure that one whole pass ran after the snapshot.
	p0 := passes.of(ns, "devices").passes
	waitPasses(t, ns, "devices", p0, 1)
	rv0, c0, p1 := resourceVersions(t, ns, "devices"), s.Counts(), passes.of(ns, "devices").passes
	waitPasses(t, ns, "devices", p1, 2)
	c1, p2 := s.Counts(), passes.of(ns, "devices").passes
	rv1 := resourceVersions(t, ns, "devices")
	if diff := cmp.Diff(rv0, rv1); diff != "" {
		t.Errorf("objects written during polls in which nothing changed (-before +after):\n%s", diff)
	}
	queries := c1.Query - c0.Query
	if others := c1.Total() - c0.Total() - queries; others != 0 {
		t.Errorf("polls in which nothing changed made %d requests besides queries: before %+v, after %+v", others, c0, c1)
	}
	if queries < 1 || queries > p2-p1+1 {
		t.Errorf("%d passes made %d queries; want one each", p2-p1, queries)
	}

	t.Log("an artifact that leaves Infrahub: its resource and object are deleted")
	if !s.DeleteArtifact("main", id2) {
		t.Fatal("the stand-in did not hold the artifact")
	}
	waitVRGone(t, ns, id2)
	waitConfigMapGone(t, ns, "two")
	if _, ok := configMapValue(t.Context(), ns, "one"); !ok {
		t.Error("the other artifact's ConfigMap went too")
	}
}

// Two syncs with the same destination, and a hand-made resource labelled as
// one of theirs, never delete each other's resources.
func TestSyncsDeleteOnlyTheirOwnResources(t *testing.T) {
	ns := namespace(t, "ihs-owners")
	a := infrahubServer(t, standin.Options{})
	b := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	a.SetArtifact("main", configMapArtifact(id1, "from-a", "a"))
	b.SetArtifact("main", configMapArtifact(id2, "from-b", "b"))
	createSync(t, ns, "sync-a", a)
	createSync(t, ns, "sync-b", b)
	handMade := testenv.CreateVR(t, vidra, ns, "hand-made", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hand-made\n", func(vr *v1alpha1.VidraResource) {
		vr.Labels = map[string]string{v1alpha1.SyncNameLabel: "sync-a"}
	})
	waitConfigMap(t, ns, "from-a", "a")
	waitConfigMap(t, ns, "from-b", "b")

	t.Log("sync-a's Infrahub lists nothing any more")
	a.DeleteArtifact("main", id1)
	waitVRGone(t, ns, id1)
	p := passes.of(ns, "sync-a").passes
	waitPasses(t, ns, "sync-a", p, 2)
	vrs, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(vrs.Items), []string{id2, "hand-made"}; !cmp.Equal(got, want) {
		t.Errorf("VidraResources left = %v, want %v", got, want)
	}
	for _, vr := range vrs.Items {
		if vr.Name == "hand-made" && vr.UID != handMade.UID {
			t.Error("the hand-made VidraResource was replaced")
		}
	}
	waitConfigMap(t, ns, "from-b", "b")
}

// An expired access token is refreshed once, without a new login and
// without a failed pass.
func TestExpiredAccessTokenIsRefreshedWithoutLogin(t *testing.T) {
	ns := namespace(t, "ihs-tokens")
	s := infrahubServer(t, standin.Options{AccessLifetime: 2 * time.Second})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "token", "v1"))
	createSync(t, ns, "devices", s)
	waitSync(t, ns, "devices", "became Ready", syncReady)
	if c := s.Counts(); c.Login != 1 {
		t.Fatalf("the first pass logged in %d times, want 1", c.Login)
	}
	failed := passes.of(ns, "devices").failed
	err := waitFor(t, 30*time.Second, func() bool { return s.Counts().Refresh >= 1 })
	if err != nil {
		t.Fatalf("the access token was never refreshed: %+v", s.Counts())
	}
	p := passes.of(ns, "devices").passes
	waitPasses(t, ns, "devices", p, 2)
	if c := s.Counts(); c.Login != 1 {
		t.Errorf("logged in %d times, want once: %+v", c.Login, c)
	}
	if f := passes.of(ns, "devices").failed; f != failed {
		t.Errorf("%d passes failed around the refresh", f-failed)
	}

	t.Log("a rotated server secret invalidates every token: one new login")
	s.RotateSecret()
	if err := waitFor(t, 30*time.Second, func() bool { return s.Counts().Login >= 2 }); err != nil {
		t.Fatalf("no new login after the secret rotated: %+v", s.Counts())
	}
	p = passes.of(ns, "devices").passes
	waitPasses(t, ns, "devices", p, 2)
	if c := s.Counts(); c.Login != 2 {
		t.Errorf("logged in %d times after one rotation, want 2", c.Login)
	}
	waitSync(t, ns, "devices", "stayed Ready", syncReady)
}

// Infrahub failing (502, 429, timeouts) makes Ready False in Vidra's words,
// keeps what was applied, and is retried with backoff.
func TestInfrahubFailuresAreReportedAndKeepWhatRuns(t *testing.T) {
	ns := namespace(t, "ihs-faults")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "kept", "v1"))
	createSync(t, ns, "devices", s)
	waitSync(t, ns, "devices", "became Ready", syncReady)
	waitConfigMap(t, ns, "kept", "v1")

	for _, tc := range []struct {
		name  string
		fault standin.Fault
		want  string
	}{
		{"502", standin.Fault{Endpoint: standin.EndpointQuery, Times: 3, Status: 502, Message: "GraphQLQuery ArtifactIDs: <script>secret</script>"}, "HTTP 502"},
		{"429", standin.Fault{Endpoint: standin.EndpointQuery, Times: 3, Status: 429, RetryAfter: time.Second, Message: "INFRAHUB-SAYS-SLOW"}, "HTTP 429"},
		{"timeout", standin.Fault{Endpoint: standin.EndpointQuery, Times: 3, Delay: 2 * callTimeout}, "no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Fault(tc.fault)
			sync := waitSync(t, ns, "devices", "reported Infrahub unavailable", syncCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInfrahubUnavailable))
			msg := readyCondition(sync).Message
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "script") || strings.Contains(msg, "INFRAHUB-SAYS-SLOW") {
				t.Errorf("Ready message = %q; want Vidra's words with %q, nothing Infrahub wrote", msg, tc.want)
			}
			if _, ok := configMapValue(t.Context(), ns, "kept"); !ok {
				t.Error("what was applied was removed while Infrahub failed")
			}
			if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), id1, metav1.GetOptions{}); err != nil {
				t.Errorf("the VidraResource of the artifact went while Infrahub failed: %v", err)
			}
			// The fault answers three queries, then Infrahub recovers.
			waitSync(t, ns, "devices", "recovered within the backoff's cap", syncReady)
		})
	}
}

// A 50 MiB or endless artifact body is refused at the bound; the artifact
// is reported, the other applied, and the operator goes on.
func TestOversizedArtifactIsRefusedAtTheBound(t *testing.T) {
	ns := namespace(t, "ihs-bounds")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "small", "v1"))
	createSync(t, ns, "devices", s)
	waitSync(t, ns, "devices", "became Ready", syncReady)

	for _, body := range []standin.Body{standin.BodyHuge, standin.BodyEndless} {
		s.Fault(standin.Fault{Endpoint: standin.EndpointDownload, Times: 1, Body: body})
		s.SetArtifact("main", configMapArtifact(id2, "big", "v1"))
		sync := waitSync(t, ns, "devices", "reported the artifact too large", func(s *v1alpha1.InfrahubSync) bool {
			for _, a := range s.Status.Artifacts {
				if a.ID == id2 && strings.Contains(a.Problem, "larger than") {
					return true
				}
			}
			return false
		})
		if c := readyCondition(sync); c == nil || c.Reason != v1alpha1.ReasonArtifactsNotApplied {
			t.Errorf("Ready = %+v, want ArtifactsNotApplied", c)
		}
		downloads := s.Counts().Download
		p := passes.of(ns, "devices").passes
		waitPasses(t, ns, "devices", p, 2)
		if d := s.Counts().Download - downloads; d != 0 {
			t.Errorf("the refused content was downloaded %d more times", d)
		}
		s.DeleteArtifact("main", id2)
		waitSync(t, ns, "devices", "became Ready again", func(s *v1alpha1.InfrahubSync) bool { return syncReady(s) && s.Status.ArtifactCount == 1 })
	}
	if _, ok := configMapValue(t.Context(), ns, "small"); !ok {
		t.Error("the other artifact's ConfigMap is gone")
	}
}

// A sync in a tenant's namespace without a ServiceAccount applies nothing
// and asks Infrahub nothing, not even a login; one whose ServiceAccount may
// not read the credentials never gets them read, nor those of another
// namespace.
func TestTenantSyncsActAsTheirServiceAccount(t *testing.T) {
	ns := namespace(t, "tenant-ihs")
	other := namespace(t, "tenant-ihs-other")
	s := infrahubServer(t, standin.Options{})
	credentials(t, other)
	s.SetArtifact("main", configMapArtifact(id1, "tenant", "v1"))

	createSync(t, ns, "no-sa", s)
	sync := waitSync(t, ns, "no-sa", "reported ServiceAccountRequired", syncCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServiceAccountRequired))
	if c := readyCondition(sync); !strings.Contains(c.Message, "spec.template.serviceAccountName") {
		t.Errorf("Ready message = %q, want it to name spec.template.serviceAccountName", c.Message)
	}

	t.Log("a ServiceAccount that may not get Secrets: the credentials of another namespace are not found, its own not read")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSync(t, ns, "other-creds", s, func(sync *v1alpha1.InfrahubSync) { sync.Spec.Template.ServiceAccountName = "deployer" })
	waitSync(t, ns, "other-creds", "reported the credentials unavailable", syncCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCredentialsUnavailable))
	credentials(t, ns)
	// A change of the sync makes it read the Secret again.
	setRequestedAt(t, ns, "other-creds", "now")
	waitSync(t, ns, "other-creds", "handled the request", func(s *v1alpha1.InfrahubSync) bool {
		c := readyCondition(s)
		return s.Status.LastHandledReconcileAt == "now" && c != nil && c.Reason == v1alpha1.ReasonCredentialsUnavailable && strings.Contains(c.Message, "may not get Secret")
	})

	p := passes.of(ns, "no-sa").passes
	waitPasses(t, ns, "no-sa", p, 1)
	if c := s.Counts(); c.Total() != 0 {
		t.Errorf("tenant syncs made requests to Infrahub: %+v", c)
	}
	vrs, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vrs.Items) != 0 {
		t.Errorf("tenant syncs created VidraResources %v", names(vrs.Items))
	}
}

func setRequestedAt(t *testing.T, ns, name, value string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + v1alpha1.RequestedAtAnnotation + `":"` + value + `"}}}`)
	if _, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Patch(t.Context(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) error {
	t.Helper()
	return wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
}

// An Infrahub whose certificate a private CA signs is trusted through
// spec.source.caSecretRef, and only through it.
func TestPrivateCAIsTrustedThroughCASecretRef(t *testing.T) {
	ns := namespace(t, "ihs-tls")
	s := infrahubServer(t, standin.Options{TLS: true})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "tls", "v1"))

	createSync(t, ns, "no-ca", s)
	sync := waitSync(t, ns, "no-ca", "reported Infrahub unavailable", syncCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInfrahubUnavailable))
	t.Logf("without the CA: %s", readyCondition(sync).Message)

	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "infrahub-ca"},
		Data:       map[string][]byte{"ca.crt": s.CertPEM()},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSync(t, ns, "with-ca", s, func(sync *v1alpha1.InfrahubSync) {
		sync.Spec.Source.CASecretRef = &v1alpha1.CASecretReference{Name: "infrahub-ca"}
	})
	waitSync(t, ns, "with-ca", "became Ready", syncReady)
	waitConfigMap(t, ns, "tls", "v1")
}

// A change of the sync's template refreshes its children without a
// download, and keeps their manifests: the operator's cache of
// VidraResources holds no manifest, so the refresh must start from the
// stored resource, never write the cached copy back.
func TestATemplateChangeRefreshesChildrenAndKeepsTheirManifests(t *testing.T) {
	ns := namespace(t, "ihs-refresh")
	s := infrahubServer(t, standin.Options{})
	credentials(t, ns)
	s.SetArtifact("main", configMapArtifact(id1, "one", "v1"))
	createSync(t, ns, "devices", s)
	vr := testenv.WaitVR(t, vidra, ns, id1, "became Ready", testenv.HasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled))
	manifest := vr.Spec.Manifest
	downloads := s.Counts().Download

	sync, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Get(t.Context(), "devices", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sync.Spec.Template.Labels = map[string]string{"team": "a"}
	if _, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Update(t.Context(), sync, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vr = testenv.WaitVR(t, vidra, ns, id1, "carried the template's label", func(vr *v1alpha1.VidraResource) bool { return vr.Labels["team"] == "a" })
	if vr.Spec.Manifest != manifest {
		t.Errorf("the refresh changed the manifest to %q, want %q", vr.Spec.Manifest, manifest)
	}
	for k := range vr.Annotations {
		if strings.Contains(k, "cached-manifest") {
			t.Errorf("the refresh wrote the cache's own annotation %s", k)
		}
	}
	if n := s.Counts().Download; n != downloads {
		t.Errorf("the refresh downloaded %d times, want none", n-downloads)
	}
}
