// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func (c *Controller) event(vr *v1alpha1.VidraResource, warning bool, reason, format string, args ...any) {
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	// One message: whatever its arguments quote (a remote server's
	// errors, a thousand names), an Event is a few KiB, and client-go's
	// correlator keys its cache of Events by their messages.
	c.recorder.Event(vr, t, reason, wording.Message(fmt.Sprintf(format, args...)))
}
