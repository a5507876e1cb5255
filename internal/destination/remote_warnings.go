// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/wording"
)

// maxAnswerHeaderBytes bounds the headers of a remote server's answer,
// which Go reads whole before any of the answer limits apply: 10 MiB by
// default, per request. A Kubernetes API server sends a few hundred bytes
// of headers, and a Warning for each problem of a request, a few KiB.
const maxAnswerHeaderBytes = 1 << 20

// warningLogEvery and maxWarningText bound what a tenant's server makes
// the operator log through Warning headers: client-go logs each of them,
// and a server may send twenty thousand in one answer, on every request.
// One a minute per cluster, cut to 256 bytes, still tells an administrator
// that a cluster warns, and of what.
const (
	warningLogEvery = time.Minute
	maxWarningText  = 256
)

// limitHeaders is a WrapTransport that bounds the headers of answers. It
// sees the transport client-go built for this client alone (the dialer
// and the proxy of remote clients keep client-go from sharing it), before
// any request.
func limitHeaders(rt http.RoundTripper) http.RoundTripper {
	if t, ok := rt.(*http.Transport); ok {
		t.MaxResponseHeaderBytes = maxAnswerHeaderBytes
	}
	return rt
}

// warningLog logs the Warning headers of one tenant cluster's answers, at
// most one every warningLogEvery, with the count of those left out.
type warningLog struct {
	server string
	clock  clock.PassiveClock

	mu      sync.Mutex
	next    time.Time
	skipped int
}

func (w *warningLog) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	now := w.clock.Now()
	if now.Before(w.next) {
		w.skipped++
		w.mu.Unlock()
		return
	}
	skipped := w.skipped
	w.next, w.skipped = now.Add(warningLogEvery), 0
	w.mu.Unlock()
	klog.FromContext(ctx).Info("A remote cluster's API server sent a warning", "server", w.server,
		"warning", wording.Cut(text, maxWarningText, "…"), "warningsNotLogged", skipped)
}
