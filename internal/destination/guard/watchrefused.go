// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import "github.com/vidra-operator/vidra/pkg/watchregistry"

// refusedWatch is the error of a watch its namespace's pool has no room
// for, as the informer that asked sees it: it matches
// watchregistry.ErrRefused, so that the watch registry stops the informer
// and tells its owners, where its reflector would retry, with a backoff of
// a second or so, for as long as the pool stays full. The circuit breaker
// is told of the pool's error itself, which fails the cluster's other
// requests for its cooldown without stopping their informers for good.
type refusedWatch struct{ err error }

func (e *refusedWatch) Error() string { return e.err.Error() }

func (e *refusedWatch) Unwrap() error { return e.err }

// Is matches watchregistry.ErrRefused.
func (e *refusedWatch) Is(target error) bool { return target == watchregistry.ErrRefused }
