// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller is Vidra's VidraResource controller: a workqueue-backed,
// level-triggered reconciler in the style of k8s.io/sample-controller.
//
// A work item is only a VidraResource key. Whatever woke it (a watch event of
// the resource or of an object it manages, the periodic re-check, a
// requested-at annotation, a retry, start-up) is recorded beside the key for
// metrics and logs, never inside it, so that every reconcile re-evaluates the
// whole desired state against the whole actual state. The queue is fair
// between namespaces (fairqueue.go) and every retry, 409s included, goes
// through its rate limiter (handleErr).
//
// One reconcile (sync.go) reads the resource from the informer cache,
// handles deletion through the finalizer (delete.go), resolves where its
// objects go and as whom (internal/destination), hands the objects to the
// server-side-apply engine (internal/apply), and writes status once, only
// when it changed, with the Events a person wants to see (status.go).
package controller
