// Package controller is Vidra's VidraResource controller: a workqueue-backed,
// level-triggered reconciler in the style of k8s.io/sample-controller.
//
// A work item is only a VidraResource key. Whatever woke it (a watch event of
// the resource or of an object it manages, the periodic re-check, a
// requested-at annotation, a retry, start-up) is recorded beside the key for
// metrics and logs, never inside it, so that every reconcile re-evaluates the
// whole desired state against the whole actual state.
//
// One reconcile (sync) reads the resource from the informer cache, handles
// deletion through the finalizer (delete.go), parses and resolves the
// manifest (internal/manifest), applies CRDs and Namespaces first and then
// the rest with server-side apply (apply.go), prunes what left the inventory
// (prune.go), tells the watch registry which resource types it needs, and
// writes status once, only when it changed (status.go). Managed objects are
// read from the watch registry's caches, so a reconcile of unchanged objects
// makes no request at all.
//
// destination.go decides where a resource's objects go and as whom: the
// local cluster, or a remote one through a kubeconfig Secret (remote*.go:
// Secrets watched metadata-only, clients rebuilt on change, a circuit
// breaker per remote credential), impersonating the resource's
// ServiceAccount when it names one.
package controller
