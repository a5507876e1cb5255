// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestCollapseOutOfTimeSaysWhyAndKeepsEarlierFailures(t *testing.T) {
	earlier := &ObjectError{Index: 0, Reason: v1alpha1.ReasonForbidden, Retry: true, Err: errors.New("configmaps is forbidden")}
	cut := &ObjectError{Index: 1, Reason: v1alpha1.ReasonApplyFailed, Retry: true, Err: fmt.Errorf("apply: %w", context.DeadlineExceeded)}
	errs := []*ObjectError{earlier, cut}

	if got := collapseOutOfTime(t.Context(), errs, 2, 5); len(got) != 2 {
		t.Fatalf("a pass with time left: %v", got)
	}
	ctx, cancel := destination.WithReconcileDeadline(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	got := collapseOutOfTime(ctx, errs, 2, 5)
	if len(got) != 2 || got[0].Reason != v1alpha1.ReasonReconcileTimeout || !got[0].Retry || got[1] != earlier {
		t.Fatalf("collapsed: %v", got)
	}
	for _, want := range []string{"ran out of its time (1ns, --reconcile-timeout)", "after 2 of 5 objects", "kept"} {
		if !strings.Contains(got[0].Message(), want) {
			t.Errorf("message %q does not say %q", got[0].Message(), want)
		}
	}
}

// TestObjectErrorNamesItsDocumentFromOne: messages number documents as an
// editor does, and an object in no document (one pruned) is named alone.
func TestObjectErrorNamesItsDocumentFromOne(t *testing.T) {
	tests := []struct {
		err  *ObjectError
		want string
	}{
		{&ObjectError{Key: ObjectKey{kind: "ConfigMap", namespace: "demo", name: "web"}, Index: 0, Err: errors.New("bad")}, "ConfigMap demo/web (document 1): bad"},
		{&ObjectError{Key: ObjectKey{kind: "ConfigMap", namespace: "demo", name: "web"}, Index: 4, Err: errors.New("bad")}, "ConfigMap demo/web (document 5): bad"},
		{&ObjectError{Key: ObjectKey{kind: "Namespace", name: "old"}, Index: -1, Err: errors.New("left the manifest")}, "Namespace old: left the manifest"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
