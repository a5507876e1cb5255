// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

// Counts are the requests the server received, per endpoint, faulty
// answers included.
type Counts struct {
	Login, Refresh, Logout, Query, GraphQL, Download int
	// Other counts the requests to any other path.
	Other int
	// GroupUpdates counts the stored-query requests with
	// update_group=true, which make Infrahub write a group: a reading
	// client sends false.
	GroupUpdates int
}

// Total is the sum of the requests (GroupUpdates are among Query).
func (c Counts) Total() int {
	return c.Login + c.Refresh + c.Logout + c.Query + c.GraphQL + c.Download + c.Other
}

// endpointOther counts requests to paths the stand-in does not serve.
const endpointOther Endpoint = "other"

func (c *Counts) add(e Endpoint) {
	switch e {
	case EndpointLogin:
		c.Login++
	case EndpointRefresh:
		c.Refresh++
	case EndpointLogout:
		c.Logout++
	case EndpointQuery:
		c.Query++
	case EndpointGraphQL:
		c.GraphQL++
	case EndpointDownload:
		c.Download++
	default:
		c.Other++
	}
}

// Counts returns the requests counted since Start or the last ResetCounts.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// ResetCounts sets every count to zero.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = Counts{}
}
