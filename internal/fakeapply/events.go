// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fakeapply

import "k8s.io/client-go/tools/record"

// DrainEvents returns the Events r recorded so far, as "Type Reason
// message", and leaves it empty.
func DrainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
