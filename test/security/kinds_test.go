// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// thingsManifest declares one object of each of the kinds Thing<from> to
// Thing<to-1> of the fake cluster.
func thingsManifest(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "---\napiVersion: hostile.example/v1\nkind: Thing%d\nmetadata:\n  name: t\n  namespace: x\n", i)
	}
	return b.String()
}

// hostileInformers counts the informers the operator runs, or keeps
// lingering, of the fake cluster's kinds.
func hostileInformers() int {
	n := 0
	for _, s := range vidraOp.Controller.Registry().Snapshots() {
		if s.Ref.GVR.Group == "hostile.example" && !slices.Contains([]string{"Forbidden", "Gone", "Stopped", "OverBudget", "Refused"}, string(s.State)) {
			n++
		}
	}
	return n
}

// TestTenantCannotEndTheOperatorWithThousandsOfKinds: a tenant's server
// whose discovery lists 4,000 kinds, and four resources naming 1,000 of
// them each. The operator started an informer for every kind a manifest
// named, before applying anything, with no bound: 4,000 kinds took 331 MiB
// and some 40,000 goroutines, past the install's memory limit. Now a
// namespace's resources have Vidra watch 64 kinds at most: the four
// resources fail with TooManyKinds, which names the bound and its flag, a
// resource of 60 kinds beside them is watched, and another tenant's
// drift is still repaired as it happens.
func TestTenantCannotEndTheOperatorWithThousandsOfKinds(t *testing.T) {
	const kinds, resources, perResource, fits = 4000, 4, 1000, 60
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, hangWatch)
	cluster.things = kinds
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})

	goroutinesBefore, heapBefore := runtime.NumGoroutine(), memAfterGC().HeapInuse
	peak := sampleHeap(t)
	createVR(t, ns, "fits", thingsManifest(0, fits), toRemoteSecret(cluster.srv.URL))
	waitVR(t, ns, "fits", "became Ready", isReady)
	for i := range resources {
		createVR(t, ns, fmt.Sprintf("many-%d", i), thingsManifest(i*perResource, (i+1)*perResource), toRemoteSecret(cluster.srv.URL))
	}
	for i := range resources {
		msg := readyMessageOf(t, ns, fmt.Sprintf("many-%d", i), v1alpha1.ReasonTooManyKinds)
		if !strings.Contains(msg, "more than the 64 Vidra watches for a namespace (--max-informers-per-namespace): nothing was applied") {
			t.Errorf("Ready of many-%d does not name the bound: %s", i, msg)
		}
		if i == 0 {
			t.Logf("Ready of many-0: %s", msg)
		}
	}
	// Ten kinds more, each within a manifest's bound, take the namespace
	// past its own: they are applied, and not watched. The barrier: the
	// kinds of fits are watched, so the namespace holds 60 of its 64.
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return hostileInformers() >= fits, nil
	}); err != nil {
		t.Fatalf("the %d kinds of fits are not all watched: %d informers: %v", fits, hostileInformers(), err)
	}
	createVR(t, ns, "more", thingsManifest(kinds-10, kinds), toRemoteSecret(cluster.srv.URL))
	msg := readyMessageOf(t, ns, "more", v1alpha1.ReasonTooManyKinds)
	t.Logf("Ready of more: %s", msg)
	if !strings.Contains(msg, "would have Vidra watch 70 kinds, more than the 64 a namespace may (--max-informers-per-namespace)") {
		t.Errorf("Ready of more does not name the bound: %s", msg)
	}
	events, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", v1alpha1.ReasonTooManyKinds).String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no TooManyKinds Event was recorded")
	}
	informers := hostileInformers()
	if informers > 64 {
		t.Errorf("the operator runs %d informers of the tenant's kinds, more than the namespace's 64", informers)
	}
	waitVR(t, ns, "fits", "still Ready", isReady)

	// Another tenant's drift is repaired as it happens, and how fast.
	other := tenant(t)
	createVR(t, other, "neighbour", cmDoc("neighbour"), asServiceAccount("deployer"))
	waitVR(t, other, "neighbour", "became Ready", isReady)
	repairs := measureRepairs(t, other, "neighbour", 5)

	_, highest, alloc := peak()
	goroutinesAfter, heapAfter := runtime.NumGoroutine(), memAfterGC().HeapInuse
	t.Logf("%d informers of the tenant's kinds; goroutines %d before, %d after (%+d); heap in use %d MiB before, %d MiB after (%+d MiB), at most %d MiB; %d MiB allocated; repairs of the neighbour's ConfigMap %v (p50 %v)",
		informers, goroutinesBefore, goroutinesAfter, goroutinesAfter-goroutinesBefore,
		heapBefore>>20, heapAfter>>20, (int64(heapAfter)-int64(heapBefore))>>20, highest>>20, alloc>>20, repairs, repairs[len(repairs)/2])
	if grew := goroutinesAfter - goroutinesBefore; grew > 2000 {
		t.Errorf("the goroutines grew by %d, more than 2,000: informers are not bounded", grew)
	}
	if grew := int64(highest) - int64(heapBefore); grew > 128<<20 {
		t.Errorf("the heap in use grew by %d MiB at its highest, more than 128 MiB", grew>>20)
	}
}

// measureRepairs deletes and then edits the ConfigMap of resource name of
// ns n times each, waits for each repair on a watch, and returns the
// repair latencies, sorted.
func measureRepairs(t *testing.T, ns, name string, n int) []time.Duration {
	t.Helper()
	cms := kube.CoreV1().ConfigMaps(ns)
	var took []time.Duration
	for i := range 2 * n {
		cur, err := cms.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: cur.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		deleted := i%2 == 0
		if deleted {
			err = cms.Delete(t.Context(), name, metav1.DeleteOptions{})
		} else {
			_, err = cms.Patch(t.Context(), name, types.MergePatchType, []byte(`{"data":{"k":"edited"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"})
		}
		if err != nil {
			w.Stop()
			t.Fatal(err)
		}
		repaired := false
		timeout := time.After(30 * time.Second)
		for !repaired {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch of the ConfigMap ended")
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				repaired = isCM && ev.Type != watch.Deleted && cm.Data["k"] == "v" && (deleted || cm.ResourceVersion != cur.ResourceVersion)
			case <-timeout:
				w.Stop()
				t.Fatalf("the ConfigMap %s/%s was not repaired within 30 s (deleted: %v)", ns, name, deleted)
			}
		}
		took = append(took, time.Since(start))
		w.Stop()
	}
	slices.Sort(took)
	return took
}

// TestServiceAccountThatMayDoNothingStartsNoInformer: a resource acting as
// a ServiceAccount that may do nothing, naming one object of every kind the
// local cluster serves. Each apply is refused; the engine used to start an
// informer of every kind before applying anything, with the operator's own
// identity, and keep them. Now kinds whose every apply was refused start no
// informer.
func TestServiceAccountThatMayDoNothingStartsNoInformer(t *testing.T) {
	ns := tenantNamespace(t)
	serviceAccount(t, ns, "nobody")
	lists, err := kube.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	served := 0
	// One object of each kind: a kind of two groups (Event) is one
	// object for the API server, and may appear once in a manifest.
	named := map[string]bool{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "create") || !slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "patch") || named[r.Kind] {
				continue
			}
			named[r.Kind] = true
			served++
			fmt.Fprintf(&b, "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: probe\n", gv.String(), r.Kind)
		}
	}
	started := vidraOp.Controller.Registry().Stats().Started
	createVR(t, ns, "everything", b.String(), asServiceAccount("nobody"))
	vr := waitVR(t, ns, "everything", "reported its refusals", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && vr.Status.ObservedGeneration == vr.Generation
	})
	refs := vidraOp.Controller.Registry().Refs(cache.ObjectName{Namespace: ns, Name: "everything"})
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	t.Logf("%d kinds named; the resource tracks %d refs; %d informers started meanwhile; Ready: %s: %.300s",
		served, len(refs), vidraOp.Controller.Registry().Stats().Started-started, c.Reason, c.Message)
	if len(refs) > 1 {
		t.Errorf("a resource whose every apply was refused has %d kinds watched, want at most one: %v", len(refs), refs)
	}
	if served < 40 {
		t.Errorf("only %d kinds served: the probe did not name every kind", served)
	}
	if c.Reason == v1alpha1.ReasonInvalidManifest || c.Reason == v1alpha1.ReasonTooManyKinds || c.Reason == "DuplicateObject" {
		t.Errorf("the manifest was refused as a whole, not object by object: %s: %s", c.Reason, c.Message)
	}
}
