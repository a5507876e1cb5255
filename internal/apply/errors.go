// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// ObjectError is a failure of one object, or of the whole resource when Key
// is zero, with the condition reason it maps to and whether a retry can fix
// it without a change by a person.
type ObjectError struct {
	Key ObjectKey
	// Index is the object's document in the manifest, or -1.
	Index  int
	Reason string
	Retry  bool
	// Conflict marks an object someone else owns or keeps changing.
	Conflict bool
	Err      error
}

func (e *ObjectError) Error() string {
	if e.Index < 0 {
		// An object that is in no document (one pruned, say) is named alone.
		return fmt.Sprintf("%s: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("%s (document %d): %v", e.Key, manifest.DocumentNumber(e.Index), e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Message is the error as a condition message says it: without an object
// when it concerns none.
func (e *ObjectError) Message() string {
	if !e.ForObject() {
		return e.Err.Error()
	}
	return e.Error()
}

// ForObject reports whether the error concerns one object rather than the
// manifest or the destination as a whole.
func (e *ObjectError) ForObject() bool { return e.Key != (ObjectKey{}) }

// collapseUnreachable replaces the errors of a pass during which the
// destination stopped answering by the one error that explains them all.
func collapseUnreachable(errs []*ObjectError) []*ObjectError {
	for _, e := range errs {
		if u := destination.Unreachable(e.Err); u != nil {
			return []*ObjectError{{Index: -1, Reason: v1alpha1.ReasonDestinationError, Retry: true, Err: u}}
		}
	}
	return errs
}

// collapseOutOfTime replaces the errors of requests that a reconcile's
// deadline cut short by one that says so: they say nothing of the objects.
// Errors met before the deadline stay.
func collapseOutOfTime(ctx context.Context, errs []*ObjectError, visited, total int) []*ObjectError {
	oot := destination.OutOfTime(ctx)
	if oot == nil {
		return errs
	}
	kept := []*ObjectError{{Index: -1, Reason: v1alpha1.ReasonReconcileTimeout, Retry: true, Err: fmt.Errorf(
		"%w after %d of %d objects: what it did is kept, and the next reconciles, with backoff, go on from there; a destination that answers slowly is the usual cause",
		oot, visited, total)}}
	for _, e := range errs {
		if !errors.Is(e.Err, context.DeadlineExceeded) {
			kept = append(kept, e)
		}
	}
	return kept
}

// manifestErrors turns parse and resolve errors into object errors, keeping
// their document index and line in the message.
func manifestErrors(errs manifest.ErrorList) []*ObjectError {
	out := make([]*ObjectError, 0, len(errs))
	transient := errs.Transient()
	for _, e := range errs {
		out = append(out, &ObjectError{Index: e.Index, Reason: e.Reason, Retry: transient, Err: e})
	}
	return out
}

// unmanagedErr reports an object in the way that Vidra does not own. The
// engine remembers such objects (resourceState.unmanaged), since the
// label-scoped caches cannot show them.
func unmanagedErr(p *planned, what string) *ObjectError {
	// Retried with backoff: the object's labels cannot be watched, so a
	// retry is how Vidra learns that someone deleted it.
	return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonUnmanagedExists, Conflict: true, Retry: true,
		Err: fmt.Errorf("%s: delete it (Vidra checks again with backoff and creates it once it is gone), or remove it from the manifest", what)}
}

// isReplaced reports the refusal of an apply guarded by a UID (applyMeta)
// because the object of that UID is gone: deleted (a conflict), or replaced
// by another of the same name (the UID is immutable).
func isReplaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && !isReplaced(err) && strings.Contains(strings.ToLower(err.Error()), "immutable")
}

// classify maps an API error to the condition reason a person acts on, and
// decides whether a retry with backoff can succeed without them.
func classify(p *planned, err error) *ObjectError {
	oe := &ObjectError{Key: p.key, Index: p.index, Err: err, Reason: v1alpha1.ReasonApplyFailed, Retry: true}
	msg := err.Error()
	switch refused := destination.RefusedAnswer(err); {
	case refused != nil:
		// It names the server and the object; the request's URL adds
		// nothing.
		oe.Err = refused
	case destination.IsUnreachable(err):
		oe.Reason = v1alpha1.ReasonDestinationError
	case meta.IsNoMatchError(err):
		oe.Reason = v1alpha1.ReasonUnknownKind
	case apierrors.IsNotFound(err) && p.obj.GetNamespace() != "" && strings.Contains(msg, "namespaces"):
		oe.Reason = v1alpha1.ReasonNamespaceNotFound
		oe.Err = fmt.Errorf("namespace %q does not exist: create it, or add it to the manifest (Vidra applies Namespaces first)", p.obj.GetNamespace())
	case apierrors.IsForbidden(err):
		oe.Reason, oe.Err = v1alpha1.ReasonForbidden, forbidden(err, p.obj.GetNamespace() == "")
	case isImmutable(err):
		oe.Reason, oe.Retry = v1alpha1.ReasonImmutableField, false
		oe.Err = fmt.Errorf("%w (set spec.force to let Vidra recreate the object)", err)
	case isSchemaRefusal(p, oe):
	case apierrors.IsRequestEntityTooLargeError(err), apierrors.IsInvalid(err) && strings.Contains(msg, "Too long"):
		oe.Reason, oe.Retry = v1alpha1.ReasonManifestTooLarge, false
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		oe.Retry = false
	}
	return oe
}

// isSchemaRefusal reports whether oe is the API server's refusal of an
// object that does not fit its kind's schema, and if so makes it say what
// to fix in the manifest. Only an edit fixes it for a built-in kind; a
// custom resource is retried, since its definition may change.
func isSchemaRefusal(p *planned, oe *ObjectError) bool {
	err, ok := SchemaRefusal(p.obj, p.line, oe.Err)
	if !ok {
		return false
	}
	oe.Reason, oe.Retry, oe.Err = v1alpha1.ReasonInvalidManifest, !builtinGroups[p.gvr.Group], err
	return true
}
