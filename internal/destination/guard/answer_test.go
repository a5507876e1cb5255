// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// TestForeignAnswersAreNotQuoted: whatever a server that is not a Kubernetes
// API server answers, the errors client-go makes of it, which become status
// messages and Events, carry none of its body.
func TestForeignAnswersAreNotQuoted(t *testing.T) {
	const secret = "internal-secret-7f3a"
	answers := map[string]struct {
		code        int
		contentType string
		body        string
	}{
		"text":           {http.StatusInternalServerError, "text/plain", secret},
		"html":           {http.StatusOK, "text/html", "<html>" + secret + "</html>"},
		"json-no-kind":   {http.StatusOK, "application/json", `{"token":"` + secret + `"}`},
		"json-error":     {http.StatusForbidden, "application/json", `{"error":"` + secret + `"}`},
		"kind-no-api":    {http.StatusOK, "application/json", `{"kind":"ConfigMap","data":"` + secret + `"}`},
		"no-type":        {http.StatusNotFound, "", secret},
		"status-message": {http.StatusForbidden, "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps is forbidden","reason":"Forbidden","code":403}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/ns/configmaps/ok":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ok","namespace":"ns"},"data":{"k":"v"}}`)
			return
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.1"}`)
			return
		}
		a, ok := answers[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		} else {
			w.Header()["Content-Type"] = nil
		}
		w.WriteHeader(a.code)
		fmt.Fprint(w, a.body)
	}))
	defer srv.Close()

	g := newTest(t, Config{AllowHTTP: true})
	cfg := &rest.Config{Host: srv.URL, Dial: g.Dial, Proxy: NoProxy, WrapTransport: g.wrapAnswers(srv.URL, g.requests, nil, nil, nil)}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns")
	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			_, err := cms.Get(t.Context(), name, metav1.GetOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the body reached the error: %v", err)
			}
			if name == "status-message" {
				if !strings.Contains(err.Error(), "configmaps is forbidden") {
					t.Errorf("a Kubernetes Status lost its message: %v", err)
				}
				return
			}
			if want := fmt.Sprintf("answered HTTP %d", a.code); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}

	// An object of a Kubernetes API server passes untouched.
	obj, err := cms.Get(t.Context(), "ok", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "k"); v != "v" {
		t.Errorf("the object changed on its way: %v", obj.Object)
	}
	// So does the server's version, which names no kind.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil || v.GitVersion != "v1.37.1" {
		t.Errorf("server version %v, %v", v, err)
	}
}

// TestWatchStreamsAreNotBuffered: a watch's answer never ends; the guard
// must hand it on as it comes.
func TestWatchStreamsAreNotBuffered(t *testing.T) {
	sent := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"1"}}}`+"\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-release
	}))
	defer srv.Close()
	defer close(release)

	g := newTest(t, Config{AllowHTTP: true})
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, Dial: g.Dial, Proxy: NoProxy, WrapTransport: g.wrapAnswers(srv.URL, g.requests, nil, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	<-sent
	ev := <-w.ResultChan()
	if o, ok := ev.Object.(*unstructured.Unstructured); !ok || o.GetName() != "a" {
		t.Fatalf("first event %v %v", ev.Type, ev.Object)
	}
}

// A tenant's own "API server" answers discovery with a body far over the
// limit. Vidra reads no more than the limit, fails with an error that says
// so, and opens the server's breaker. (A 200 MiB answer once took the heap
// to 2.5 GiB and the caller 2.5 minutes.)
func TestRemoteAnswerOverTheLimitIsRefused(t *testing.T) {
	const limit, size = 1 << 20, 64 << 20
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		hostiletest.StreamJSON(w, `{"kind":"APIVersions","versions":["`, `"]}`, size)
	})
	c, allocated := clientsFor(t, srv, limit)
	_, err := c.discovery.ServerGroups()
	alloc := allocated()
	want := fmt.Sprintf("the API server at %s sent an answer over 1 MiB", srv.URL)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if !c.failures.any() {
		t.Error("the answer over the limit did not count as a failure of the server")
	}
	if alloc > 16<<20 {
		t.Errorf("refusing a %d MiB answer allocated %d MiB", size>>20, alloc>>20)
	}
	t.Logf("%d MiB answer, limit 1 MiB: %d MiB allocated; %v", size>>20, alloc>>20, err)
}

// An answer that says its length up front is refused before it is read.
func TestRemoteAnswerDeclaredOverTheLimitIsNotRead(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(8<<20))
		w.WriteHeader(http.StatusOK)
		// The server need not send what it announced: nothing is read.
	})
	c, _ := clientsFor(t, srv, 1<<20)
	_, err := c.probe.Get().AbsPath("/version").Do(t.Context()).Raw()
	if err == nil || !strings.Contains(err.Error(), "sent an answer over 1 MiB") {
		t.Fatalf("err = %v; want an answer over 1 MiB", err)
	}
}

// What a tenant's server might send to slip past the limits: protobuf
// (which no count of its text bounds), a stream announced on an answer that
// is not a watch's, a redirect the client does not follow, and a kind of
// discovery's on an answer that is not discovery's. Each is read within
// the limits or replaced.
func TestRemoteAnswersThatTryToSlipPastTheLimits(t *testing.T) {
	var accepts atomic.Value
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		accepts.Store(r.Header.Get("Accept"))
		switch r.URL.Query().Get("try") {
		case "protobuf":
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			io.WriteString(w, "k8s\x00"+strings.Repeat("\x0a\x00", 1<<20))
		case "stream":
			w.Header().Set("Content-Type", "application/json;stream=watch")
			hostiletest.StreamJSON(w, `{}`+strings.Repeat("{}", 1<<10), "", 64<<20)
		case "redirect":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMultipleChoices)
			hostiletest.StreamJSON(w, `{"kind":"Status","apiVersion":"v1","message":"`, `"}`, 64<<20)
		case "kind":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","items":[`+strings.TrimSuffix(strings.Repeat("{},", 2*maxAnswerValues), ",")+`]}`)
		}
	})
	for try, want := range map[string]string{
		"protobuf": "not a Kubernetes API answer (application/vnd.kubernetes.protobuf; not shown)",
		"stream":   "sent an answer over 8 MiB",
		"redirect": "answered HTTP 300 with a body that is not a Kubernetes API answer",
		"kind":     fmt.Sprintf("sent an answer over %d JSON values", maxAnswerValues),
	} {
		// Clients of their own: one refusal opens the breaker of the next.
		c, allocated := clientsFor(t, srv, 8<<20)
		err := c.probe.Get().AbsPath("/api/v1/namespaces/ns/configmaps/a").Param("try", try).SetHeader("Accept", "application/vnd.kubernetes.protobuf,application/json").Do(t.Context()).Error()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v; want one saying %q", try, err, want)
		}
		if a, _ := accepts.Load().(string); strings.Contains(a, "protobuf") {
			t.Errorf("%s: the server was asked for protobuf: Accept %q", try, a)
		}
		if alloc := allocated(); alloc > 48<<20 {
			t.Errorf("%s: refusing it allocated %d MiB", try, alloc>>20)
		}
	}
}

// Discovery documents get a larger bound, told by the path asked for.
func TestRemoteDiscoveryIsToldByItsPath(t *testing.T) {
	for _, tc := range []struct {
		path      string
		discovery bool
	}{
		{"/api", true}, {"/apis", true}, {"/api/v1", true}, {"/apis/apps/v1", true},
		{"/api/v1/configmaps", false}, {"/apis/apps/v1/deployments", false}, {"/apis/apps/v1/namespaces/a/deployments/b", false}, {"/version", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://remote.example"+tc.path, nil)
		if got := isDiscoveryPath(req); got != tc.discovery {
			t.Errorf("%s: discovery %v, want %v", tc.path, got, tc.discovery)
		}
	}
}

// An answer to a request is bounded in values too, since each worker may
// be decoding one; discovery documents, decoded into fixed structs, may
// hold more.
func TestRemoteAnswerOfTinyValuesIsRefused(t *testing.T) {
	values := func(kind, apiVersion string, n int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"name":"a","namespace":"ns"},"data":{"k":[`, kind, apiVersion)
			io.WriteString(w, strings.TrimSuffix(strings.Repeat("{},", n), ","))
			io.WriteString(w, `]}}`)
		}
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	srv := hostiletest.Server(t, values("ConfigMap", "v1", 2*maxAnswerValues))
	c, allocated := clientsFor(t, srv, 64<<20)
	_, err := c.client.Resource(cms).Namespace("ns").Get(t.Context(), "a", metav1.GetOptions{})
	want := fmt.Sprintf("sent an answer over %d JSON values", maxAnswerValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("refusing an answer of %d values allocated %d MiB", 2*maxAnswerValues, alloc>>20)
	}

	n := (maxAnswerValues + maxDiscoveryValues) / 4 // {} and its comma: two values each
	srv = hostiletest.Server(t, values("APIResourceList", "v1", n))
	c, _ = clientsFor(t, srv, 64<<20)
	if err := c.probe.Get().AbsPath("/api/v1").Do(t.Context()).Error(); err != nil {
		t.Errorf("a discovery document of %d values: %v", 2*n, err)
	}
}

// An answer about an object Vidra declares (AnswersAbout) is bounded by
// the object's size: each worker may be holding one, and a tenant's server
// answers with as much as Vidra reads. Other answers keep the limits of
// any answer.
func TestRemoteAnswerAboutAnObjectIsBoundedByIt(t *testing.T) {
	var entries, size atomic.Int64
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"},"data":{`)
		value := strings.Repeat("v", int(size.Load()))
		for i := range entries.Load() {
			if i > 0 {
				io.WriteString(w, ",")
			}
			fmt.Fprintf(w, `"k%d":%q`, i, value)
		}
		io.WriteString(w, `}}`)
	})
	declared := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns"},
		"data":     map[string]any{"k": "v"},
	}}
	about := AnswersAbout(t.Context(), declared, 0)
	c, _ := clientsFor(t, srv, maxAnswerBytes)
	get := func(ctx context.Context) error {
		_, err := c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(ctx, "a", metav1.GetOptions{})
		return err
	}
	steps := []struct {
		name          string
		entries, size int64
		about         bool
		want          string
	}{
		{"an answer of a real server's size", 50, 100, true, ""},
		{"2 MiB about a small object", 2, 1 << 20, true, "sent an answer about ConfigMap ns/a over 1025 KiB"},
		{"40,000 values about a small object", 40_000, 0, true, "sent an answer about ConfigMap ns/a over 20"},
		{"2 MiB about no object in particular", 2, 1 << 20, false, ""},
		{"40,000 values about no object in particular", 40_000, 0, false, ""},
	}
	for _, s := range steps {
		entries.Store(s.entries)
		size.Store(s.size)
		ctx := t.Context()
		if s.about {
			ctx = about
		}
		err := get(ctx)
		if c.failures.any() {
			// A refused answer fails its request, not the server.
			t.Errorf("%s: the breaker opened", s.name)
		}
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.want != "" && (err == nil || !strings.Contains(err.Error(), s.want) || !strings.Contains(err.Error(), "far beyond its manifest")):
			t.Errorf("%s: err = %v; want one saying %q", s.name, err, s.want)
		}
	}

	// The clusters of the operator's own namespace, whose Secrets only
	// administrators write, are not bounded so.
	entries.Store(2)
	size.Store(1 << 20)
	own := clientsIn(t, srv, newTest(t, Config{}), testOperatorNamespace)
	if _, err := own.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(about, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("2 MiB about a small object, on a cluster of the operator's namespace: %v", err)
	}
}
