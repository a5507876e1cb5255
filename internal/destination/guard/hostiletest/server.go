// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package hostiletest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Server is a TLS server of a tenant's own, answering every request with
// handler, closed when the test ends.
func Server(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// ResourceList writes the discovery document of group h.example/v1 with n
// resources, five JSON values each.
func ResourceList(w io.Writer, n int) {
	_, _ = io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"h.example/v1","resources":[`)
	for i := range n {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		fmt.Fprintf(w, `{"name":"r%d","kind":"K%d","verbs":[]}`, i, i)
	}
	_, _ = io.WriteString(w, `]}`)
}

// StreamJSON writes a JSON answer of about size bytes: prefix, a string of
// size bytes, suffix, until the client stops reading.
func StreamJSON(w http.ResponseWriter, prefix, suffix string, size int) {
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, prefix); err != nil {
		return
	}
	chunk := strings.Repeat("a", 64<<10)
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, suffix)
}
