// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// The informers' clients read lists, which get a larger limit than other
// answers, and bound them too.
func TestRemoteListOverTheLimitIsRefused(t *testing.T) {
	const limit = 256 << 10
	list := func(size int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			hostiletest.StreamJSON(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"},"data":{"k":"`, `"}}]}`, size)
		}
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

	// Over the limit of one object, under that of a list: read.
	srv := hostiletest.Server(t, list(2*limit))
	c, _ := clientsFor(t, srv, limit)
	if l, err := c.watch.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("a list under the list limit: %v", err)
	}

	// Over the limit of a list: refused.
	srv = hostiletest.Server(t, list(64<<20))
	c, allocated := clientsFor(t, srv, limit)
	_, err := c.watch.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "sent a list over 1 MiB") {
		t.Fatalf("err = %v; want a list over 1 MiB (the list limit)", err)
	}
	if !c.failures.any() {
		t.Error("the list over the limit did not open the breaker")
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("refusing a 64 MiB list allocated %d MiB", alloc>>20)
	}
}

// A list under the byte limit can still decode into far more memory than
// its size: 64 MiB of tiny objects once decoded into 1 GiB. Lists are
// bounded in JSON values too, before client-go decodes them.
func TestRemoteListOfTinyValuesIsRefused(t *testing.T) {
	const objects = 100_000 // 6 MiB of text, 600,000 values
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
		tinyObjects(w, 0, objects)
		io.WriteString(w, `]}`)
	})
	c, allocated := clientsFor(t, srv, 64<<20)
	_, err := c.watch.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	want := fmt.Sprintf("sent a list over %d JSON values", maxListValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if !c.failures.any() {
		t.Error("the list over the limit did not open the breaker")
	}
	// The text is read (6 MiB, twice over as it grows); decoded, it would
	// be over 100 MiB.
	if alloc := allocated(); alloc > 48<<20 {
		t.Errorf("refusing a list of %d tiny objects allocated %d MiB", objects, alloc>>20)
	}
}

// A server may answer a list in pages, each under the limits, for ever:
// client-go's pager holds every page until the last. The pages of a list
// are bounded together.
func TestRemoteListPagesAddUp(t *testing.T) {
	var pages atomic.Int32
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":"page-%d"},"items":[`, n)
		tinyObjects(w, int(n)*1000, 1000)
		io.WriteString(w, `]}`)
	})
	c, allocated := clientsFor(t, srv, 64<<20)
	lw := &cache.ListWatch{ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
		return c.watch.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").List(ctx, o)
	}}
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (kruntime.Object, error) { return lw.ListWithContext(t.Context(), o) }))
	_, _, err := p.ListWithAlloc(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	want := fmt.Sprintf("sent a list over %d JSON values", maxListValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	// 6,000 values a page: the limit is passed on page 42.
	if n := pages.Load(); n != maxListValues/6000+1 {
		t.Errorf("%d pages read; want %d", n, maxListValues/6000+1)
	}
	// The pager holds the 42,000 objects decoded (some 40 MiB), and
	// allocated about three times that on the way; without the bound it
	// grows until the process dies.
	alloc := allocated()
	if alloc > 256<<20 {
		t.Errorf("refusing endless pages allocated %d MiB", alloc>>20)
	}
	t.Logf("%d pages, %d MiB allocated", pages.Load(), alloc>>20)
}

// A list without a continue token starts afresh; pages of another list
// (another selector) are counted apart.
func TestRemoteListPagesAreCountedPerList(t *testing.T) {
	g := &answerGuard{server: "https://remote.example", limits: answerLimits{answer: 1 << 20, values: 10, lists: true}, lists: map[string]listRead{}}
	page := []byte(`{"items":[{},{},{},{}]}`) // 6 values
	read := func(query string) error {
		req, _ := http.NewRequest(http.MethodGet, "https://remote.example/api/v1/configmaps?"+query, nil)
		_, err := g.countValues(req, page, g.boundOf(req))
		return err
	}
	steps := []struct {
		query   string
		refused bool
	}{
		{"labelSelector=a", false},
		{"labelSelector=b", false},           // another list
		{"labelSelector=a&continue=x", true}, // 12 values
		{"labelSelector=a", false},           // afresh
		{"labelSelector=b&continue=y", true}, // 12 values
		{"labelSelector=b&fieldSelector=f", false},
	}
	for i, s := range steps {
		if err := read(s.query); (err != nil) != s.refused {
			t.Errorf("step %d (%s): err = %v; refused want %v", i, s.query, err, s.refused)
		}
	}
}

// A remote cluster's informers list, then watch: a list streamed as a
// watch (client-go's default) is held object by object until the server
// says it is complete, which a tenant's server need never say.
func TestRemoteInformersListInsteadOfStreaming(t *testing.T) {
	var mu sync.Mutex
	var requests []string
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if IsWatch(r) {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	})
	c, _ := clientsFor(t, srv, 64<<20)
	inf := dynamicinformer.NewFilteredDynamicInformer(c.watch, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ns", 0, nil, nil).Informer()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		inf.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range requests {
		if strings.Contains(q, "sendInitialEvents") {
			t.Fatalf("the informer streamed its list: %q", requests)
		}
	}
	if len(requests) == 0 || strings.Contains(requests[0], "watch=") {
		t.Fatalf("requests %q; want a list first", requests)
	}
}

// The informers of one namespace's clusters read one list at a time, since
// each list is held whole and decoded before it is cached, and a tenant
// chooses how many kinds its clusters list; another namespace's lists do
// not wait for them.
func TestRemoteListsOfANamespaceAreReadOneAtATime(t *testing.T) {
	g := newTest(t, Config{})
	var inFlight, most atomic.Int32
	hold := make(chan struct{})
	var release sync.Once
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Query().Get("labelSelector") == "held" {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	})
	// Registered after the server's: runs before it closes, which waits
	// for the held list, should the test end early.
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	client := func(namespace string) dynamic.Interface {
		return clientsIn(t, srv, g, namespace).watch
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	list := func(c dynamic.Interface, selector string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			done <- err
		}()
		return done
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("%s: %v (lists at the server: %d)", what, err, inFlight.Load())
		}
	}
	a1, a2, b := client("team-a"), client("team-a"), client("team-b")
	held := list(a1, "held")
	until("team a's first list never reached the server", func() bool { return inFlight.Load() == 1 })
	waiting := list(a2, "")
	until("team a's second list did not wait for the first", func() bool { return g.listSlot("team-a").waiting.Load() == 1 })
	// Another namespace's list does not wait for team a's.
	if err := <-list(b, ""); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("%d lists were read at once; want 2 (team a's first and team b's)", m)
	}
	release.Do(func() { close(hold) })
	for _, done := range []<-chan error{held, waiting} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
