// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// badCase is one file of testdata/bad: a manifest, headed by the condition
// reason ("# expect-reason: R") and a message fragment ("# expect-message: M")
// it must produce, and optionally the Event reason ("# expect-event: E")
// when eventReasonFor cannot tell it from the condition reason.
type badCase struct {
	name, manifest, reason, fragment, event string
}

func loadBadCorpus(t *testing.T) []badCase {
	t.Helper()
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("bad-input corpus: %v (%d files)", err, len(files))
	}
	var cases []badCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The header lines are not part of the manifest, so that JSON stays
		// JSON and line numbers count from the manifest's first line.
		c := badCase{name: strings.TrimSuffix(filepath.Base(f), ".yaml")}
		var body strings.Builder
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "# expect-reason:"); ok {
				c.reason = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(line, "# expect-message:"); ok {
				c.fragment = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(line, "# expect-event:"); ok {
				c.event = strings.TrimSpace(v)
			} else {
				body.WriteString(line + "\n")
			}
		}
		c.manifest = body.String()
		if c.reason == "" || c.fragment == "" {
			t.Fatalf("%s lacks its # expect-reason: or # expect-message: header", f)
		}
		if c.event == "" {
			c.event = eventReasonFor(c.reason)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestBadInputCorpus runs every manifest of testdata/bad end to end: each
// ends in Ready=False with its reason, a message naming the problem and an
// Event, while a healthy resource beside them stays Ready and untouched, and
// no informer is left running for kinds nobody manages.
func TestBadInputCorpus(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "healthy", configMap("healthy", map[string]string{"k": "v"}))
	waitReady(t, ns, "healthy")
	healthy, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "healthy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cases := loadBadCorpus(t)
	for _, c := range cases {
		createVR(t, ns, c.name, c.manifest)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vr := waitVR(t, ns, c.name, "failed with "+c.reason, hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, c.reason))
			if msg := readyMessage(vr); !strings.Contains(msg, c.fragment) {
				t.Errorf("Ready message %q lacks %q", msg, c.fragment)
			}
			waitEvent(t, ns, c.name, c.event, c.fragment)
			if vr.Status.ManagedCount != 0 {
				t.Errorf("a bad manifest applied objects: %+v", vr.Status.ManagedResources)
			}
			// Nothing applied: no health to judge, not a healthy set.
			if !hasCondition(v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied)(vr) {
				t.Errorf("Healthy of a resource that applied nothing: %+v", meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionHealthy))
			}
		})
	}

	// The bad resources have all failed; the healthy one, reconciling
	// after them, is still Ready and has written nothing.
	reconciled(t, ns, "healthy")
	if vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "healthy", metav1.GetOptions{}); err != nil || !isReady(vr) {
		t.Errorf("the healthy resource is not Ready beside the bad ones: %v (err %v)", vr, err)
	}
	if cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "healthy", metav1.GetOptions{}); err != nil || cm.ResourceVersion != healthy.ResourceVersion {
		t.Errorf("the healthy resource's object was written beside the bad ones: %v (err %v)", cm, err)
	}
	// Only known kinds are ever watched: no informer for the unknown one.
	unknown := watchregistry.Ref{GVR: schema.GroupVersionResource{Group: "nowhere.e2e.vidra.test", Version: "v1", Resource: "doohickeys"}}
	if st := vidraOp.Controller.Registry().State(unknown); st != watchregistry.StateNotTracked {
		t.Errorf("state of the unknown kind's watch = %s, want not tracked", st)
	}
}
