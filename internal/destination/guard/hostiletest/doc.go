// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostiletest is for tests: the API server of a hostile tenant, and
// the answers it sends to make the operator read and hold more than it
// should. The tests of the remote guard and of the resolver that wires it
// share it.
package hostiletest
