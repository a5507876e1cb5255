// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vidra-operator/vidra/internal/wording"
)

func TestEventsAreTypedAndCut(t *testing.T) {
	fake := record.NewFakeRecorder(2)
	r := New(fake)
	obj := &corev1.ConfigMap{}
	r.Event(obj, true, "Failed", "%s", strings.Repeat("x", 10*wording.MaxMessage))
	r.Event(obj, false, "Applied", "Applied %d objects", 3)
	warning, normal := <-fake.Events, <-fake.Events
	if !strings.HasPrefix(warning, "Warning Failed ") || len(warning) > wording.MaxMessage+len("Warning Failed ") {
		t.Errorf("warning Event = %.60q… (%d bytes), want a Warning cut to %d bytes", warning, len(warning), wording.MaxMessage)
	}
	if normal != "Normal Applied Applied 3 objects" {
		t.Errorf("normal Event = %q", normal)
	}
	New(nil).Event(obj, false, "Nobody", "listens") // does not panic
}
