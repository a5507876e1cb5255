// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cachecharge decides how the watch registry's caches hold each
// object carrying Vidra's marks, and whose account pays for it: an object
// that the VidraResource its marks name declares, on the cluster that
// resource deploys to, is held in full and charged to that resource's
// namespace; any other (made-up or foreign owner, an owner that deploys
// elsewhere, an object its owner does not declare) is held as a stub of a
// fixed, bounded size, charged to the cluster's stub account and to no
// tenant. Decide is the decision, a value a table tests; Budgets holds the
// byte budget of each namespace, which the registry never lets its caches
// exceed: what does not fit is held as a stub, read from the API server
// when needed, and counted so that the namespace's resources can say so.
package cachecharge
