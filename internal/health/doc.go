// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package health tells how a managed object is doing, in kstatus'
// vocabulary: Current, InProgress, Failed, Terminating, NotFound or Unknown,
// with a short message a person can act on.
//
// Of computes an object's health from the object alone, as the watch
// registry's cache holds it: it reads no cluster, keeps no state and never
// mutates the object, so it is safe on shared informer objects and cheap
// enough to run on every event. The rules are kstatus' (the ones Flux uses):
// built-in workloads by their replica counts and conditions, any object by
// its Ready, Reconciling and Stalled conditions and its observedGeneration,
// and objects without status, such as ConfigMaps or RBAC, Current once they
// exist. Vidra adds one rule: a LoadBalancer Service is InProgress until its
// load balancer has an ingress address.
//
// Digest folds Of's answer into a number, so that the watch registry can
// wake an owner on a status-only update only when the health it reports
// would change.
package health
