// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/klog/v2"
)

// wrapAnswers is a rest.Config WrapTransport for remote clients: answers
// that are not a Kubernetes API server's are replaced before client-go
// reads them. client-go copies a text body into its error, and a JSON body
// without a kind into its decoding error, and those errors end in status
// conditions and Events, which tenants read: any server Vidra can reach
// would otherwise answer the tenant through them. Answers and watch events
// over limits fail; failed, if not nil, is told of a watch event over its
// limit, found after the request succeeded (the circuit breaker's fail).
// Watch streams are counted in pool, discovery documents in discovery, when
// not nil.
func (g *Guard) wrapAnswers(server string, limits answerLimits, failed func(error), pool *namespacePool, discovery *discoveryAccount) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &answerGuard{server: server, allowHTTP: g.allowHTTP, limits: limits, failed: failed, pool: pool, discovery: discovery, pause: g.pause, now: g.now, next: rt, lists: map[string]listRead{}}
	}
}

type answerGuard struct {
	server string
	// allowHTTP lets requests go over plain http: every hop of a redirect
	// passes here, and is held to the rule its server was.
	allowHTTP bool
	limits    answerLimits
	failed    func(error)
	pool      *namespacePool
	// discovery counts the discovery documents of the cluster.
	discovery *discoveryAccount
	pause     func(d time.Duration, stop, cancel <-chan struct{}) bool
	now       func() time.Time
	next      http.RoundTripper

	mu sync.Mutex
	// lists holds what was read of each list, by path and selectors, for
	// limits.lists: the pages of a list add up.
	lists map[string]listRead
}

// listRead is what was read of a list's pages so far.
type listRead struct{ bytes, values int64 }

// maxErrorBody bounds what is read of an error answer to check it: a
// Kubernetes Status is a few hundred bytes.
const maxErrorBody = 64 << 10

func (t *answerGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	// The server was checked to be https; a redirect it answers is followed
	// by the HTTP client through here, and would otherwise take the
	// request, its manifest and the kubeconfig's credentials, in clear
	// text, to any plain-http service the operator can reach.
	if !t.allowHTTP && !strings.EqualFold(req.URL.Scheme, "https") {
		return nil, fmt.Errorf("%s redirected a request to %s, which is not https: Vidra sends credentials and manifests over https only (--allow-http-destinations allows http)", t.server, req.URL.Redacted())
	}
	watch := IsWatch(req)
	if t.limits.timeout > 0 && !watch {
		// Every answer but a watch's is read whole below, before the
		// deadline is let go.
		ctx, cancel := context.WithTimeout(req.Context(), t.limits.timeout)
		defer cancel()
		req = req.WithContext(ctx)
	}
	if t.discovery != nil && t.limits.discovery {
		if err := t.discovery.held(); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(jsonOnly(req))
	if err != nil || resp == nil {
		return resp, err
	}
	verdict, body, rerr := t.kubernetesAnswer(req, resp)
	switch {
	case rerr != nil:
		resp.Body.Close()
		var tooLarge *answerTooLargeError
		if errors.As(rerr, &tooLarge) {
			klog.FromContext(req.Context()).V(2).Info("Refused an answer over its limit",
				"server", t.server, "path", req.URL.Path, "code", resp.StatusCode, "limit", tooLarge.limit, "values", tooLarge.values)
			return nil, rerr
		}
		var pool *discoveryPoolError
		if errors.As(rerr, &pool) {
			klog.FromContext(req.Context()).V(2).Info("Refused a discovery document over the namespace's pool",
				"server", t.server, "path", req.URL.Path, "namespace", pool.namespace, "values", pool.values, "max", pool.max)
			return nil, rerr
		}
		return nil, fmt.Errorf("read the answer of %s: %w", t.server, rerr)
	case verdict == answerStream:
		b := &eventLimitBody{body: resp.Body, guard: t, done: make(chan struct{}), cancel: req.Context().Done(), log: klog.FromContext(req.Context())}
		if !b.resize(watchStreamBytes) {
			resp.Body.Close()
			err := t.poolFull()
			if t.failed != nil {
				t.failed(err)
			}
			return nil, &refusedWatch{err: err}
		}
		resp.Body = b
		return resp, nil
	case verdict == answerKubernetes:
		if body != nil {
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
		return resp, nil
	}
	resp.Body.Close()
	klog.FromContext(req.Context()).V(2).Info("Replaced an answer that is not a Kubernetes API server's",
		"server", t.server, "path", req.URL.Path, "code", resp.StatusCode, "contentType", resp.Header.Get("Content-Type"))
	return foreignAnswer(req, resp, t.server), nil
}

// countValues bounds the JSON values of an answer read whole (of the list
// its pages make up, for lists), and returns the answer's own.
func (t *answerGuard) countValues(req *http.Request, body []byte, bound answerBound) (int64, error) {
	var scan jsonScan
	for _, c := range body {
		scan.feed(c)
	}
	read := listRead{bytes: int64(len(body)), values: scan.values}
	if bound.list {
		q := req.URL.Query()
		key := req.URL.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector")
		t.mu.Lock()
		if q.Get("continue") != "" {
			prev := t.lists[key]
			read.bytes += prev.bytes
			read.values += prev.values
		}
		t.lists[key] = read
		t.mu.Unlock()
	}
	switch {
	case read.values > bound.values:
		return 0, bound.tooLarge(t, 0, bound.values)
	case read.bytes > bound.bytes:
		return 0, bound.tooLarge(t, bound.bytes, 0)
	}
	return scan.values, nil
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *answerGuard) WrappedRoundTripper() http.RoundTripper { return t.next }

// answerVerdict is what kubernetesAnswer makes of an answer.
type answerVerdict int

const (
	// answerForeign is not a Kubernetes API server's answer.
	answerForeign answerVerdict = iota
	// answerKubernetes is, and was read whole if it has a body.
	answerKubernetes
	// answerStream is a watch's stream, read as it comes.
	answerStream
)

// kubernetesAnswer tells whether resp looks like an answer of a Kubernetes
// API server: JSON, an error in a Status, an object that names
// its kind. It reads every answer but a watch's whole, within the limits,
// and returns what it read, for the caller to put back.
func (t *answerGuard) kubernetesAnswer(req *http.Request, resp *http.Response) (answerVerdict, []byte, error) {
	if followed(resp) || resp.StatusCode == http.StatusNotModified {
		// Followed by the HTTP client, whose next request comes through
		// here; a 304 has no body, whatever the server sends. Any other
		// 3xx is handed back to client-go, which reads its body: it is
		// read below as an error answer.
		return answerKubernetes, nil, nil
	}
	media, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || media != "application/json" {
		// Protobuf too: only JSON is asked for (see jsonOnly). Protobuf
		// decodes into typed objects in which two bytes of text (an
		// empty repeated message) cost a hundred: no count of the text
		// bounds them.
		return answerForeign, nil, nil
	}
	if IsWatch(req) {
		// A watch answers with a stream that never ends, which must not be
		// read here; its decoding errors reach the log, never a status.
		return answerStream, nil, nil
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	var body []byte
	bound := t.boundOf(req)
	if ok2xx {
		limit := bound.bytes
		if resp.ContentLength > limit {
			return answerForeign, nil, bound.tooLarge(t, limit, 0)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1)); err != nil {
			return answerForeign, nil, err
		}
		if int64(len(body)) > limit {
			return answerForeign, nil, bound.tooLarge(t, limit, 0)
		}
	} else {
		// An error answer is the server's say on one request, not a
		// failure of the server: one too long to be a Status is cut, and
		// then fails the checks below.
		if body, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)); err != nil {
			return answerForeign, nil, err
		}
	}
	if ok2xx && req.URL.Path == "/version" {
		// Decoded into a fixed struct: unknown fields are dropped, nothing
		// of the body reaches an error.
		return answerKubernetes, body, nil
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil || tm.Kind == "" {
		return answerForeign, nil, nil
	}
	switch {
	case !ok2xx && (tm.Kind != "Status" || tm.APIVersion != "v1"):
		return answerForeign, nil, nil
	case tm.APIVersion == "" && !isDiscoveryKind(tm.Kind):
		// The dynamic client's decoder quotes an object without apiVersion.
		return answerForeign, nil, nil
	}
	if ok2xx {
		values, err := t.countValues(req, body, bound)
		if err != nil {
			return answerForeign, nil, err
		}
		if t.discovery != nil && t.limits.discovery && !t.discovery.charge(req.URL.Path, values) {
			err := &discoveryPoolError{server: t.server, namespace: t.discovery.pool.namespace, values: values, max: t.discovery.pool.max}
			t.discovery.refuse(err)
			return answerForeign, nil, err
		}
	}
	if !ok2xx {
		body = boundStatus(body)
	}
	return answerKubernetes, body, nil
}

// isDiscoveryPath reports a request of discovery: /api, /apis, /api/<v>
// and /apis/<group>/<v>.
func isDiscoveryPath(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

// followed reports a redirect the HTTP client follows: one of its codes,
// with a Location to go to.
func followed(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// jsonOnly returns req asking for JSON answers only: client-go's metadata
// and discovery clients ask for protobuf first, which no count of the text
// bounds (see kubernetesAnswer).
func jsonOnly(req *http.Request) *http.Request {
	accept := req.Header.Get("Accept")
	if accept == "" || !strings.Contains(accept, "protobuf") {
		return req
	}
	var keep []string
	for _, t := range strings.Split(accept, ",") {
		if !strings.Contains(t, "protobuf") {
			keep = append(keep, strings.TrimSpace(t))
		}
	}
	if len(keep) == 0 {
		keep = []string{"application/json"}
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", strings.Join(keep, ","))
	return req
}

// isDiscoveryKind reports the answers of discovery that may carry no
// apiVersion; client-go decodes them into fixed structs.
func isDiscoveryKind(kind string) bool {
	switch kind {
	case "APIVersions", "APIGroupList", "APIGroup", "APIResourceList":
		return true
	}
	return false
}

// IsWatch reports a watch request (client-go's ?watch=true), whose JSON
// answer the API server sends as plain application/json.
func IsWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// foreignAnswer is what client-go reads instead of an answer that is not
// Kubernetes': the HTTP code and a fixed text of Vidra's, none of the body.
// It is plain text, which client-go quotes in its error whatever the
// request (a Status would be lost on discovery's requests, which read the
// raw answer).
func foreignAnswer(req *http.Request, resp *http.Response, server string) *http.Response {
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if media == "" {
		media = "no content type"
	}
	body := fmt.Sprintf("the server at %s answered HTTP %d with a body that is not a Kubernetes API answer (%s; not shown): is destination.server a Kubernetes API server?",
		server, resp.StatusCode, media)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", http.StatusBadGateway, http.StatusText(http.StatusBadGateway)),
		StatusCode:    http.StatusBadGateway,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
