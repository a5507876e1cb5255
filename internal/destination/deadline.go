// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// deadlineError is the cause of the context of a reconcile that ran out of
// its time.
type deadlineError struct{ limit time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("the reconcile ran out of its time (%s, --reconcile-timeout)", e.limit)
}

// WithReconcileDeadline gives a reconcile at most d; zero means no limit.
// Requests it cuts short are not held against their server (see the
// breaker): the reconcile ran out of time, whoever spent it.
func WithReconcileDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, &deadlineError{limit: d})
}

// OutOfTime returns the error saying that ctx's reconcile ran out of its
// time (WithReconcileDeadline), or nil when it did not.
func OutOfTime(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	var d *deadlineError
	if errors.As(context.Cause(ctx), &d) {
		return d
	}
	return nil
}
