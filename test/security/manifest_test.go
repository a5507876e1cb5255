// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// heapBudget is how far the heap in use may grow above where it was while
// the operator handles the alias bomb and a healthy resource after it.
// Expanding the bomb allocated 1.5 GB and grew the process to 971 MiB;
// parsing it within Vidra's bounds allocates about 12 MiB in all. The heap
// in use, sampled, is measured rather than the total allocated, which the
// operator's other work (resources of earlier tests still reconciling)
// inflates.
const heapBudget = 64 << 20

// issueAliasBomb returns the 44 KB manifest of issue 13: a ConfigMap whose
// 20,000 padding nodes defeat a ratio of aliases to nodes, a 4 KB string
// fanned out tenfold over five levels, then "..." and a broken document,
// whose syntax error once sent the whole text to a YAML library that
// expanded it to 1.5 GB.
func issueAliasBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n")
	b.WriteString("pad: [" + strings.Repeat("0,", 20000) + "0]\n")
	b.WriteString("l0: &l0 \"" + strings.Repeat("x", 4096) + "\"\n")
	for l := 1; l <= 5; l++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l-1), 10), ","))
	}
	b.WriteString("...\nbroken: [\n")
	return b.String()
}

// TestHostileManifestCannotTakeOperatorDown creates the alias bomb of issue
// 13 in the trusted namespace (so that no identity rule stops it before the
// parser) and checks that the operator reports it in a condition and an
// Event, goes on reconciling other resources, and allocates little doing so.
func TestHostileManifestCannotTakeOperatorDown(t *testing.T) {
	ns := operatorNamespace
	deleteResourcesAtEnd(t, ns, "bomb", "after-bomb")

	peak := sampleHeap(t)

	createVR(t, ns, "bomb", issueAliasBomb())
	vr := waitVR(t, ns, "bomb", "refused the bomb", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "aliases expand to too much data") {
		t.Errorf("Ready message %q does not say the aliases expand too much", c.Message)
	}
	waitWarningEvent(t, ns, "bomb", v1alpha1.ReasonInvalidManifest, "aliases expand to too much data")

	// The barrier: a resource created after the bomb is reconciled, so the
	// operator is up and its workers are free.
	createVR(t, ns, "after-bomb", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after-bomb\ndata:\n  k: v\n")
	waitVR(t, ns, "after-bomb", "became Ready after the bomb", isReady)
	if getObject(t, configMaps, ns, "after-bomb") == nil {
		t.Errorf("ConfigMap after-bomb was not applied")
	}
	if getObject(t, configMaps, ns, "bomb") != nil {
		t.Errorf("the bomb's ConfigMap was applied")
	}

	before, highest, alloc := peak()
	if highest > before+heapBudget {
		t.Errorf("the heap in use grew from %d MiB to %d MiB while the operator handled the bomb, more than the budget of %d MiB", before>>20, highest>>20, heapBudget>>20)
	}
	t.Logf("heap in use %d MiB before, at most %d MiB during; %d MiB allocated in all", before>>20, highest>>20, alloc>>20)
}

// sampleHeap starts sampling the heap in use of the process, which runs the
// operator, every 10 ms. The function it returns stops the sampling and
// returns the heap in use at the start, the most seen, and the bytes
// allocated in between.
func sampleHeap(t *testing.T) func() (before, highest, alloc uint64) {
	t.Helper()
	var start runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&start)
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		highest := start.HeapInuse
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			highest = max(highest, m.HeapInuse)
			select {
			case <-stop:
				done <- highest
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	var result [3]uint64
	finish := func() (uint64, uint64, uint64) {
		once.Do(func() {
			close(stop)
			highest := <-done
			var end runtime.MemStats
			runtime.ReadMemStats(&end)
			result = [3]uint64{start.HeapInuse, highest, end.TotalAlloc - start.TotalAlloc}
		})
		return result[0], result[1], result[2]
	}
	// A test that fails before reading the peak still stops the sampler.
	t.Cleanup(func() { finish() })
	return finish
}

// TestCRDRefusesTooShortIntervalAndBadServiceAccountName checks the CRD's
// rules against the API server: an interval of 0 turns the re-check off,
// anything else must be at least 1s (a shorter one would make a resource a
// reconcile loop), and serviceAccountName must be a ServiceAccount name,
// not "namespace:name" or a user.
func TestCRDRefusesTooShortIntervalAndBadServiceAccountName(t *testing.T) {
	tests := []struct {
		field, value string
		accepted     bool
		// says is a part of the refusal's message a person can act on.
		says string
	}{
		{"interval", "1ns", false, "at least 1s"},
		{"interval", "5", false, "a number needs its unit"},
		{"interval", "ten minutes", false, "such as 30s, 10m"},
		{"interval", "-5m", false, "Go duration"},
		{"interval", "1h30m", true, ""},
		{"interval", "500ms", false, "at least 1s"},
		{"interval", "0.5s", false, "at least 1s"},
		{"interval", "0", true, ""},
		{"interval", "0s", true, ""},
		{"interval", "1s", true, ""},
		{"interval", "10m", true, ""},
		{"serviceAccountName", "a:b", false, "must be the name of a ServiceAccount of this namespace, such as deployer"},
		{"serviceAccountName", "system:serviceaccount:kube-system:default", false, "not a user name"},
		{"serviceAccountName", "Deployer", false, "lowercase letters"},
		{"serviceAccountName", "team.deployer-1", true, ""},
		{"serviceAccountName", "deployer", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			err := createDryRun(t, tt.field, tt.value)
			checkVerdict(t, err, fmt.Sprintf("%s %q", tt.field, tt.value), tt.accepted, "spec."+tt.field, tt.says)
		})
	}
}

// The names a resource gives of a namespace or a Secret end up in the paths
// of requests; the schema refuses any that is not a name ("../nodes/x/proxy"
// would be another path) and says so in words. The code refuses them too,
// for resources stored before the schema did (TestSyncDecisions).
func TestCRDRefusesNamesThatAreNotNames(t *testing.T) {
	tests := []struct {
		name, field string
		value       any
		accepted    bool
		// refused is the path of the refused field; says, a part of the
		// refusal's message a person can act on.
		refused, says string
	}{
		{"a service's proxy", "destination", map[string]any{"namespace": "kube-system/services/https:metrics-server:443/proxy/x"}, false,
			"spec.destination.namespace", "must be the name of a namespace, such as demo"},
		{"a parent path", "destination", map[string]any{"namespace": "../nodes/n:10250/proxy"}, false, "spec.destination.namespace", "lowercase letters"},
		{"a namespace", "destination", map[string]any{"namespace": "demo"}, true, "", ""},
		{"none", "destination", map[string]any{"namespace": ""}, true, "", ""},
		{"a dependency's parent path", "dependsOn", []any{map[string]any{"name": "db", "namespace": "../x"}}, false,
			"spec.dependsOn[0].namespace", "must be the name of a namespace"},
		{"a dependency's namespace", "dependsOn", []any{map[string]any{"name": "db", "namespace": "data"}}, true, "", ""},
		{"a Secret's parent path", "destination", map[string]any{"server": "https://remote.example:6443",
			"kubeconfigSecretRef": map[string]any{"name": "../../../api/v1/nodes"}}, false,
			"spec.destination.kubeconfigSecretRef.name", "must be the name of a Secret of this namespace"},
		{"a Secret", "destination", map[string]any{"server": "https://remote.example:6443",
			"kubeconfigSecretRef": map[string]any{"name": "prod.kubeconfig"}}, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := createDryRun(t, tt.field, tt.value)
			checkVerdict(t, err, fmt.Sprintf("%s %v", tt.field, tt.value), tt.accepted, tt.refused, tt.says)
		})
	}
}

// checkVerdict checks the API server's answer err to a dry run of what:
// accepted, or refused as Invalid with a message that names the refused
// field and says, in words rather than a regular expression, what a value
// must be.
func checkVerdict(t *testing.T, err error, what string, accepted bool, refused, says string) {
	t.Helper()
	switch {
	case accepted:
		if err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
	case err == nil:
		t.Errorf("%s accepted, want refused", what)
	case !apierrors.IsInvalid(err):
		t.Errorf("%s refused with %v, want Invalid", what, err)
	case !strings.Contains(err.Error(), refused):
		t.Errorf("error %q does not name %s", err, refused)
	case !strings.Contains(err.Error(), says):
		t.Errorf("error %q does not say %q", err, says)
	case strings.Contains(err.Error(), "should match"):
		t.Errorf("error %q shows a regular expression, not words", err)
	}
}

// createDryRun creates, as a dry run, a VidraResource of one ConfigMap with
// spec.field set to value, and returns the API server's answer. A dry run
// is validated in full and stores nothing, so the operator never sees it.
func createDryRun(t *testing.T, field string, value any) error {
	t.Helper()
	vr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "VidraResource",
		"metadata":   map[string]any{"name": "crd-rules", "namespace": operatorNamespace},
		"spec": map[string]any{
			"manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crd-rules\n",
			field:      value,
		},
	}}
	_, err := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)).Namespace(operatorNamespace).
		Create(t.Context(), vr, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// The schema refuses spec.ignore paths that are not JSON pointers or reach
// deeper than 32 steps, each of which every reconcile would look for in
// every object, and says so in words.
func TestCRDRefusesIgnorePathsThatAreNotShallowPointers(t *testing.T) {
	deep := func(steps int) string { return "/spec" + strings.Repeat("/a", steps-1) }
	for _, tt := range []struct {
		path     string
		accepted bool
	}{
		{"/spec/replicas", true},
		{"/metadata/annotations/example.com~1key", true},
		{deep(32), true},
		{deep(33), false},
		{"spec/replicas", false},
		{"/a~2b", false},
		{"", false},
	} {
		t.Run(fmt.Sprintf("%.24q", tt.path), func(t *testing.T) {
			err := createDryRun(t, "ignore", []any{map[string]any{"paths": []any{tt.path}}})
			says := "at most 32 steps deep"
			if tt.path == "" {
				says = "" // refused for its length, in the API server's words
			}
			checkVerdict(t, err, fmt.Sprintf("path %q", tt.path), tt.accepted, "spec.ignore[0].paths[0]", says)
		})
	}
}

// deleteResourcesAtEnd deletes the VidraResources named in ns when the test ends and
// waits until they are gone, finalizers done, so that no later test sees
// them or their objects.
func deleteResourcesAtEnd(t *testing.T, ns string, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		client := vidra.InfrahubV1alpha1().VidraResources(ns)
		for _, name := range names {
			if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete VidraResource %s/%s: %v", ns, name, err)
			}
		}
		for _, name := range names {
			err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := client.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Errorf("VidraResource %s/%s was not deleted: %v", ns, name, err)
			}
		}
	})
}

// waitWarningEvent waits for a Warning Event on VidraResource ns/name with reason whose
// message contains fragment.
func waitWarningEvent(t *testing.T, ns, name, reason, fragment string) {
	t.Helper()
	selector := fields.Set{"involvedObject.name": name, "involvedObject.kind": "VidraResource", "reason": reason}.AsSelector().String()
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, fragment) {
				return true, nil
			}
			seen = append(seen, e.Message)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Warning Event %s on %s/%s containing %q: %v; saw %q", reason, ns, name, fragment, err, seen)
	}
}
