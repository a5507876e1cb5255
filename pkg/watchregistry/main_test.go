// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
)

// env is the package's control plane; nil under go test -short, where only
// the tests that need none run (make unit).
var env *controlplane.Env

func TestMain(m *testing.M) { controlplane.RunMainShort(m, &env, controlplane.Options{}) }

// controlPlane returns the admin configuration of the control plane, and
// skips the test under go test -short: every test that talks to the API
// server gets its configuration here rather than from env.
func controlPlane(t testing.TB) *rest.Config {
	t.Helper()
	return controlplane.Need(t, env)
}

const (
	managedBy = "app.kubernetes.io/managed-by"
	// selector scopes every test registry to the objects the tests create.
	selector = managedBy + "=watchregistry-test"
	// ownerLabel names the owner of a test object; testMap maps by it.
	ownerLabel = "owner"
	waitFor    = 30 * time.Second
)

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	crdGVR     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// clients builds the clients of cfg; the request counter, when given, counts
// list and watch requests whose path ends in one of the resources.
type clients struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	md  metadata.Interface
}

func newClients(t testing.TB, cfg *rest.Config) clients {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{cs: cs, dyn: dyn, md: md}
}

// requestCounter counts GET requests (list and watch) for one resource, to
// prove that a failed informer stops asking.
type requestCounter struct {
	resource string
	n        atomic.Int64
	// open counts those not over yet: sent, and neither failed nor their
	// body closed. A list outlives the reflector that sent it (client-go
	// lists in a goroutine of its own), and the retries of a request in
	// flight would be new ones.
	open atomic.Int64
}

func (c *requestCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+c.resource) {
				return rt.RoundTrip(req)
			}
			c.n.Add(1)
			c.open.Add(1)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				c.open.Add(-1)
				return resp, err
			}
			resp.Body = &closeOnce{ReadCloser: resp.Body, closed: func() { c.open.Add(-1) }}
			return resp, nil
		})
	})
	return cfg
}

// closeOnce is a response body that calls closed once, when first closed.
type closeOnce struct {
	io.ReadCloser
	once   sync.Once
	closed func()
}

func (b *closeOnce) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.closed)
	return err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// refuser answers the list and watch requests of one path with 403
// Forbidden while on, as an API server whose RBAC refuses them would, and
// passes them through otherwise: unlike RBAC, it can refuse a namespace
// and allow all namespaces, and it takes effect at once.
type refuser struct {
	path string
	on   atomic.Bool
}

func (f *refuser) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet || req.URL.Path != f.path || !f.on.Load() {
				return rt.RoundTrip(req)
			}
			body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"configmaps is forbidden: refused by the test"}`
			return &http.Response{
				Status: "403 Forbidden", StatusCode: http.StatusForbidden,
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header:        http.Header{"Content-Type": {"application/json"}},
				Body:          io.NopCloser(strings.NewReader(body)),
				ContentLength: int64(len(body)),
				Request:       req,
			}, nil
		})
	})
	return cfg
}

// injector passes the watch streams of one path through and adds events of
// its own to them, as a hostile API server may: events the real one would
// never send.
type injector struct {
	path    string
	mu      sync.Mutex
	streams map[*io.PipeWriter]struct{}
}

func (in *injector) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Path != in.path || req.URL.Query().Get("watch") == "" || resp.StatusCode != http.StatusOK {
				return resp, err
			}
			upstream := resp.Body
			pr, pw := io.Pipe()
			in.mu.Lock()
			if in.streams == nil {
				in.streams = map[*io.PipeWriter]struct{}{}
			}
			in.streams[pw] = struct{}{}
			in.mu.Unlock()
			// Event by event, so that an injected one never lands inside
			// another. The stream ends when the server ends it or the
			// client closes it, which closes upstream too.
			go func() {
				defer func() {
					in.mu.Lock()
					delete(in.streams, pw)
					in.mu.Unlock()
				}()
				dec := json.NewDecoder(upstream)
				for {
					var ev json.RawMessage
					if err := dec.Decode(&ev); err != nil {
						pw.CloseWithError(err)
						return
					}
					in.mu.Lock()
					_, err := pw.Write(append(ev, '\n'))
					in.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			resp.Body = pipeBody{pr, upstream}
			return resp, nil
		})
	})
	return cfg
}

// watching reports whether a watch stream is open.
func (in *injector) watching() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.streams) > 0
}

// inject writes a watch event to every open stream and reports how many
// took it.
func (in *injector) inject(t testing.TB, event map[string]any) int {
	t.Helper()
	b, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for pw := range in.streams {
		if _, err := pw.Write(append(b, '\n')); err == nil {
			n++
		}
	}
	return n
}

// pipeBody is a watch response body read from a pipe; closing it closes the
// server's stream too.
type pipeBody struct {
	*io.PipeReader
	upstream io.Closer
}

func (b pipeBody) Close() error {
	b.PipeReader.Close()
	return b.upstream.Close()
}

// holdingMap is a Map that holds the nth event it sees whose object
// matches until released, and testMap otherwise: holding an object of an
// informer's initial list holds the informer's sync.
type holdingMap struct {
	match   func(watchregistry.Event) bool
	n       int64
	seen    atomic.Int64
	blocked chan struct{} // closed once the nth event is held
	open    chan struct{}
	once    sync.Once
}

func newHoldingMap(n int64, match func(watchregistry.Event) bool) *holdingMap {
	return &holdingMap{match: match, n: n, blocked: make(chan struct{}), open: make(chan struct{})}
}

func (m *holdingMap) mapFunc(ev watchregistry.Event) []string {
	if m.match(ev) && m.seen.Add(1) == m.n {
		close(m.blocked)
		<-m.open
	}
	return testMap(ev)
}

func (m *holdingMap) release() { m.once.Do(func() { close(m.open) }) }

// waitClosed waits for ch to be closed, failing the test after waitFor.
func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("waiting for %s: not within %s", what, waitFor)
	}
}

// newNamespace creates a namespace deleted when the test ends.
func newNamespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	return controlplane.Namespace(t, cs, "wr-")
}

// configMap returns a managed ConfigMap of owner.
func configMap(ns, name, owner string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{managedBy: "watchregistry-test", ownerLabel: owner},
		},
		Data: data,
	}
}

func createConfigMap(t testing.TB, cs kubernetes.Interface, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	got, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// patchConfigMap applies a JSON merge patch and returns the new object.
func patchConfigMap(t testing.TB, cs kubernetes.Interface, ns, name, patch string) *corev1.ConfigMap {
	t.Helper()
	got, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch configmap %s/%s: %v", ns, name, err)
	}
	return got
}

// record is one Enqueue call.
type record struct {
	key string
	ev  watchregistry.Event
}

func (r record) String() string {
	s := fmt.Sprintf("%s <- %s %s", r.key, r.ev.Type, r.ev.Ref)
	if r.ev.Object != nil {
		s += fmt.Sprintf(" %s/%s@%s", r.ev.Object.GetNamespace(), r.ev.Object.GetName(), r.ev.Object.GetResourceVersion())
	}
	return s
}

// recorder collects Enqueue calls for assertions.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) enqueue(key string, ev watchregistry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, record{key, ev})
}

// mark returns a position; waitAfter looks only at records after it.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

func (r *recorder) since(pos int) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.recs[pos:]...)
}

func (r *recorder) count(pred func(record) bool) int {
	n := 0
	for _, rec := range r.since(0) {
		if pred(rec) {
			n++
		}
	}
	return n
}

// waitAfter waits for the first record after pos that matches pred and
// returns it.
func (r *recorder) waitAfter(t testing.TB, pos int, what string, pred func(record) bool) record {
	t.Helper()
	var found record
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		for _, rec := range r.since(pos) {
			if pred(rec) {
				found = rec
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; got:\n%s", what, err, r.dump(pos))
	}
	return found
}

// waitCount waits until n records match pred.
func (r *recorder) waitCount(t testing.TB, what string, pred func(record) bool, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.count(pred) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d %s: %v; got:\n%s", n, what, err, r.dump(0))
	}
}

func (r *recorder) dump(pos int) string {
	var b strings.Builder
	for _, rec := range r.since(pos) {
		b.WriteString("  " + rec.String() + "\n")
	}
	return b.String()
}

// isEvent matches an event of the given type for the named object.
func isEvent(typ watchregistry.EventType, name string) func(record) bool {
	return func(r record) bool {
		return r.ev.Type == typ && r.ev.Object != nil && r.ev.Object.GetName() == name
	}
}

// forObject matches any event for the named object.
func forObject(name string) func(record) bool {
	return func(r record) bool { return r.ev.Object != nil && r.ev.Object.GetName() == name }
}

func isType(typ watchregistry.EventType, key string) func(record) bool {
	return func(r record) bool { return r.ev.Type == typ && r.key == key }
}

// testMap maps an object to the owner named by its owner label.
func testMap(ev watchregistry.Event) []string {
	if o := ev.Object.GetLabels()[ownerLabel]; o != "" {
		return []string{o}
	}
	return nil
}

// startRegistry creates a registry for the local cluster of c, runs it until
// the test ends and waits for Run to return.
func startRegistry(t testing.TB, c clients, opts watchregistry.Options[string]) *watchregistry.Registry[string] {
	t.Helper()
	r := newRegistry(t, c, opts)
	run(t, r)
	return r
}

func newRegistry(t testing.TB, c clients, opts watchregistry.Options[string]) *watchregistry.Registry[string] {
	t.Helper()
	if opts.LabelSelector == "" {
		opts.LabelSelector = selector
	}
	if opts.Map == nil {
		opts.Map = testMap
	}
	if opts.Linger == 0 {
		opts.Linger = 200 * time.Millisecond
	}
	r, err := watchregistry.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.SetCluster("", c.dyn, c.md)
	return r
}

// run runs r until the test ends; the cleanup fails the test if Run does not
// return, which would mean an informer that does not stop.
func run(t testing.TB, r *watchregistry.Registry[string]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Errorf("Run did not return within %s of its context ending", waitFor)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitState(t testing.TB, r *watchregistry.Registry[string], ref watchregistry.Ref, want watchregistry.State) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.State(ref) == want, nil
	})
	if err != nil {
		t.Fatalf("%s: state %s, want %s", ref, r.State(ref), want)
	}
}

func track(t testing.TB, r *watchregistry.Registry[string], owner string, refs ...watchregistry.Ref) {
	t.Helper()
	if err := r.Track(owner, refs); err != nil {
		t.Fatal(err)
	}
}

// waitGoroutines waits until the goroutine count is back within tolerance
// of base.
func waitGoroutines(t testing.TB, base, tolerance int) {
	t.Helper()
	var n int
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		n = runtime.NumGoroutine()
		return n <= base+tolerance, nil
	})
	if err != nil {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines: %d, baseline %d (+%d tolerated)\n%s", n, base, tolerance, buf)
	}
}

// crd creates a namespaced CustomResourceDefinition serving v1 and waits
// until it is established; it is deleted when the test ends.
func crd(t testing.TB, c clients, group, kind string, statusSubresource bool) schema.GroupVersionResource {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	version := map[string]any{
		"name": "v1", "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		}},
	}
	if statusSubresource {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group":    group,
			"scope":    "Namespaced",
			"names":    map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{version},
		},
	}}
	createCRD(t, c, obj)
	t.Cleanup(func() { deleteCRD(t, c, obj.GetName()) })
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
}

func createCRD(t testing.TB, c clients, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.dyn.Resource(crdGVR).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", obj.GetName(), err)
	}
	err := waitEstablished(ctx, c.dyn, obj.GetName())
	if err != nil {
		t.Fatalf("CRD %s not established: %v", obj.GetName(), err)
	}
}

// deleteCRD deletes a CRD and waits until it is gone, custom resources
// included.
func deleteCRD(t testing.TB, c clients, name string) {
	t.Helper()
	ctx := context.Background()
	err := c.dyn.Resource(crdGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete CRD %s: %v", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitFor, true, func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("CRD %s not deleted: %v", name, err)
	}
}

// customResource returns a managed custom resource of owner.
func customResource(gvr schema.GroupVersionResource, kind, ns, name, owner string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata": map[string]any{
			"namespace": ns, "name": name,
			"labels": map[string]any{managedBy: "watchregistry-test", ownerLabel: owner},
		},
		"spec": map[string]any{"size": int64(1)},
	}}
}

// waitEstablished polls until the named CRD has condition Established=True.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitFor, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
