// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/vidra-operator/vidra/internal/wording"
)

// Recorder records Events with a formatted message of wording.MaxMessage
// bytes at most.
type Recorder struct {
	r record.EventRecorder
}

// New wraps r; nil discards every Event.
func New(r record.EventRecorder) Recorder {
	if r == nil {
		r = &record.FakeRecorder{}
	}
	return Recorder{r: r}
}

// Event records an Event on obj, a Warning or a Normal one. Whatever its
// arguments quote (a remote server's errors, a thousand names), the message
// is cut to a few KiB: an Event is stored as any object, and client-go's
// correlator keys its cache of Events by their messages.
func (r Recorder) Event(obj runtime.Object, warning bool, reason, format string, args ...any) {
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	r.r.Event(obj, t, reason, wording.Message(fmt.Sprintf(format, args...)))
}
