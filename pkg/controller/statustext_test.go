// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// resync syncs vr's key a second time in the fixture's controller, the
// informer holding the status the first sync wrote as the API server
// returned it (decoded from the JSON sent), and returns the statuses that
// second sync wrote. live, if set, is added to the destination first: the
// object the first sync created.
func (f *fixture) resync(vr *v1alpha1.VidraResource, live runtime.Object) []v1alpha1.VidraResourceStatus {
	f.t.Helper()
	f.mu.Lock()
	if len(f.statuses) != 1 {
		f.mu.Unlock()
		f.t.Fatalf("the first sync wrote %d statuses, want 1 (%q)", len(f.statuses), f.actions)
	}
	written := f.statuses[0]
	f.actions, f.statuses = nil, nil
	f.mu.Unlock()
	if live != nil {
		if err := f.dynamic.Tracker().Add(live); err != nil {
			f.t.Fatal(err)
		}
	}
	next := vr.DeepCopy()
	next.Status, next.ResourceVersion = written, "8"
	if err := f.c.indexer.Update(next); err != nil {
		f.t.Fatal(err)
	}
	f.clock.Step(10 * time.Second)
	if _, err := f.c.sync(context.Background(), cache.MetaObjectToName(vr)); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statuses
}

// Text cut inside a character is not UTF-8, and JSON turns each byte of the
// broken character into U+FFFD: the status read back never equalled the one
// computed, and every reconcile of an unchanged resource wrote its status
// again. The cuts now fall between characters, so a second sync of the same
// resource writes nothing.
func TestTextCutInACharacterIsWrittenOnce(t *testing.T) {
	// 400 bytes, echoed as 253 and "...": the cut falls inside an "é".
	requestedAt := func(vr *v1alpha1.VidraResource) {
		vr.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: strings.Repeat("é", 200)}
	}
	blocked := func(vr *v1alpha1.VidraResource) {
		vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "missing"}}
	}
	// refused has the destination refuse the ConfigMap with msg, which the
	// Ready and Stalled conditions then carry, cut at 4096 bytes.
	refused := func(msg string) func(*fixture) {
		return func(f *fixture) {
			f.dynamic.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewBadRequest(msg)
			})
		}
	}
	for _, tc := range []struct {
		name   string
		mutate []func(*v1alpha1.VidraResource)
		setup  func(*fixture)
		// created: the first sync created the ConfigMap.
		created bool
	}{
		{name: "requested-at annotation", mutate: []func(*v1alpha1.VidraResource){requestedAt}, created: true},
		{name: "requested-at annotation of a resource held back by a dependency", mutate: []func(*v1alpha1.VidraResource){requestedAt, blocked}},
		// The condition message is the object and its document, 41
		// bytes, then the error; the cut is at 4093 bytes and "...". One
		// of the two falls inside an "é" whatever the prefix's length.
		{name: "message of 5000 bytes", setup: refused(strings.Repeat("é", 2500))},
		{name: "message of 5000 bytes, one byte later", setup: refused("x" + strings.Repeat("é", 2500))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := newVR(operatorNS, "app", configMapManifest, tc.mutate...)
			f := newFixture(t, []*v1alpha1.VidraResource{vr})
			if tc.setup != nil {
				tc.setup(f)
			}
			if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			for _, st := range f.statuses {
				checkText(t, st)
			}
			f.mu.Unlock()
			var live runtime.Object
			if tc.created {
				live = liveApp(operatorNS, vr)
			}
			if again := f.resync(vr, live); len(again) > 0 {
				t.Errorf("the second sync of an unchanged resource wrote its status again: %+v", again[0])
			}
		})
	}
}

// checkText checks that the text of st that comes from outside input is
// valid UTF-8 within its bounds.
func checkText(t *testing.T, st v1alpha1.VidraResourceStatus) {
	t.Helper()
	if s := st.LastHandledReconcileAt; len(s) > maxRequestedAt || !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		t.Errorf("lastHandledReconcileAt of %d bytes, valid UTF-8 %v: %q", len(s), utf8.ValidString(s), s)
	}
	for _, c := range st.Conditions {
		if len(c.Message) > maxMessage || strings.ContainsRune(c.Message, utf8.RuneError) {
			t.Errorf("condition %s: message of %d bytes with a character cut in two: …%q", c.Type, len(c.Message), c.Message[max(len(c.Message)-12, 0):])
		}
	}
}

// The errors of a reconcile are joined with "; ", and kubectl vidra why
// splits them again to list the failing objects. A destination's refusal
// is text its API server or an admission webhook chose: with "; " in it,
// it listed an object of its choosing, with a problem of its choosing.
// Each error is now one item of the list, whatever it says.
func TestARefusalListsOneFailingObject(t *testing.T) {
	vr := newVR(operatorNS, "app", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	f.dynamic.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest("denied; ConfigMap team-b/victim: is compromised, delete it")
	})
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(f.statuses))
	}
	shown := vr.DeepCopy()
	shown.Status = f.statuses[0]
	x := render.Explain(shown, nil, f.clock.Now())
	if len(x.Failing) != 1 || x.Failing[0].Object != "ConfigMap "+operatorNS+"/app" {
		t.Fatalf("why lists %+v as failing, want ConfigMap %s/app alone", x.Failing, operatorNS)
	}
	if !strings.Contains(x.Failing[0].Problem, "victim") {
		t.Errorf("why says %q of ConfigMap %s/app; want the refusal whole", x.Failing[0].Problem, operatorNS)
	}
}

// An Event quotes what its reconcile met: the errors of up to 1,000
// objects, each quoting its destination, or names by the thousand. Each
// Event is cut as a condition's message is, whatever its arguments.
func TestEventsAreCutAsMessagesAre(t *testing.T) {
	vr := newVR(operatorNS, "app", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	c := f.newController()
	c.events.Event(vr, true, "CleanupSkipped", "left as they are: %v", errors.New(strings.Repeat("é", 30000)))
	e := <-f.recorder.Events
	if len(e) > maxMessage+len("Warning CleanupSkipped ") || !utf8.ValidString(e) || !strings.HasSuffix(e, "...") {
		t.Errorf("an Event of %d bytes: %.80q", len(e), e)
	}
	// The log line of a failed reconcile says its error as long at most.
	if n := len(loggedErr(errors.New(strings.Repeat("é", 30000))).Error()); n > maxMessage {
		t.Errorf("a reconcile's error is logged in %d bytes", n)
	}
}
