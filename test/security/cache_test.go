// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// fakeCluster is a tenant's own "API server": enough of Kubernetes' API for
// Vidra to apply ConfigMaps to it (discovery, server-side apply), with the
// list and the watch of ConfigMaps left to the test. With things > 0 it
// serves that many kinds more, Thing0, Thing1, ... (resources things0, ...
// of group hostile.example/v1), listed and watched the same way.
type fakeCluster struct {
	srv    *httptest.Server
	things int
	// list answers a list of ConfigMaps (or things), watch a watch of them;
	// apply, when set, a server-side apply (the object as sent otherwise).
	list, watch, apply func(w http.ResponseWriter, r *http.Request)
	lists              atomic.Int64
	watches            atomic.Int64
}

func newFakeCluster(t *testing.T, list, watch func(w http.ResponseWriter, r *http.Request)) *fakeCluster {
	t.Helper()
	c := &fakeCluster{list: list, watch: watch}
	c.srv = httptest.NewTLSServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeCluster) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch path := r.URL.Path; {
	case path == "/version":
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.1"}`)
	case path == "/api":
		fmt.Fprint(w, `{"kind":"APIVersions","apiVersion":"v1","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`)
	case path == "/api/v1":
		fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[`+
			`{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["create","delete","get","list","patch","update","watch"]}]}`)
	case path == "/apis" && c.things > 0:
		fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"hostile.example","versions":[{"groupVersion":"hostile.example/v1","version":"v1"}],"preferredVersion":{"groupVersion":"hostile.example/v1","version":"v1"}}]}`)
	case path == "/apis":
		fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
	case path == "/apis/hostile.example/v1" && c.things > 0:
		resources := make([]string, c.things)
		for i := range resources {
			resources[i] = fmt.Sprintf(`{"name":"things%d","singularName":"thing%d","namespaced":true,"kind":"Thing%d","verbs":["create","delete","get","list","patch","update","watch"]}`, i, i, i)
		}
		fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"hostile.example/v1","resources":[`+strings.Join(resources, ",")+`]}`)
	case (strings.HasSuffix(path, "/configmaps") || thingsCollection.MatchString(path)) && r.Method == http.MethodGet:
		if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
			c.watches.Add(1)
			c.watch(w, r)
			return
		}
		c.lists.Add(1)
		c.list(w, r)
	case (strings.Contains(path, "/configmaps/") || strings.HasPrefix(path, "/apis/hostile.example/")) && r.Method == http.MethodPatch:
		if c.apply != nil {
			c.apply(w, r)
			return
		}
		// Server-side apply: the object as sent, with what a server adds.
		var obj map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &obj); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`)
			return
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		md["resourceVersion"], md["uid"] = "1", "00000000-0000-0000-0000-000000000001"
		_ = json.NewEncoder(w).Encode(obj)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// thingsCollection matches the path of a list or watch of things.
var thingsCollection = regexp.MustCompile(`^/apis/hostile\.example/v1/(namespaces/[^/]+/)?things[0-9]+$`)

// hangWatch holds a watch open, sending nothing, until the client leaves.
func hangWatch(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// tinyConfigMaps writes n ConfigMaps of a few JSON values each: the
// cheapest text that decodes into the most memory.
func tinyConfigMaps(w io.Writer, n int) {
	for i := range n {
		if i > 0 {
			io.WriteString(w, ",")
		}
		fmt.Fprintf(w, `{"metadata":{"name":"c%d","namespace":"x","labels":{"a":"b"}}}`, i)
	}
}

// TestRemoteListOfTinyObjectsCannotTakeOperatorDown: a tenant's server
// answers the list of an informer with 12 MiB of tiny ConfigMaps, 1.2
// million JSON values, under every byte limit. Decoded, they took some
// 200 MiB of heap (the operator's limit is 256 Mi), and a list can be
// sent again on every relist. Now the list is refused before it is decoded,
// the resource says why, and the heap stays within budget.
func TestRemoteListOfTinyObjectsCannotTakeOperatorDown(t *testing.T) {
	const objects = 200_000
	var once sync.Once
	listed := make(chan struct{})
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
		tinyConfigMaps(w, objects)
		io.WriteString(w, `]}`)
		once.Do(func() { close(listed) })
	}, hangWatch)
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})

	peak := sampleHeap(t)
	createVR(t, ns, "tiny", cmDoc("x"), toRemoteSecret(cluster.srv.URL))
	msg := readyMessageOf(t, ns, "tiny", v1alpha1.ReasonDestinationError)
	<-listed
	if !strings.Contains(msg, "sent a list over 250000 JSON values") || !strings.Contains(msg, "is destination.server a Kubernetes API server?") {
		t.Errorf("Ready message does not say the list was over the limit: %s", msg)
	}
	// The barrier: another namespace's resource is reconciled after it.
	other := tenant(t)
	createVR(t, other, "after", cmDoc("after"), asServiceAccount("deployer"))
	waitVR(t, other, "after", "became Ready", isReady)

	before, highest, alloc := peak()
	if highest > before+heapBudget {
		t.Errorf("the heap in use grew from %d MiB to %d MiB while the operator read the list, more than the budget of %d MiB", before>>20, highest>>20, heapBudget>>20)
	}
	t.Logf("%d lists read; heap in use %d MiB before, at most %d MiB during; %d MiB allocated in all; Ready: %s",
		cluster.lists.Load(), before>>20, highest>>20, alloc>>20, msg)
}

// TestRemoteClusterCannotFillTheOperatorsCaches: a tenant's server lists
// nothing, then sends ADDED events of new ConfigMaps, each under every
// limit, without end. The informer cached them all until the operator ran
// out of memory. Now the caches of a namespace's remote clusters have a
// budget for stubs (30,000 objects or 32 MiB): past it the cluster's informers stop,
// their caches are dropped, the resource reports why, and the cluster is
// not listed again before a hold.
func TestRemoteClusterCannotFillTheOperatorsCaches(t *testing.T) {
	const events = 60_000
	var sent, floods atomic.Int64
	watchEnded := make(chan struct{}, 1)
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			select {
			case watchEnded <- struct{}{}:
			default:
			}
		}()
		w.WriteHeader(http.StatusOK)
		if floods.Add(1) > 1 {
			// Once is enough: after its hold the cluster is watched again.
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		for i := range events {
			if _, err := fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"flood-%d","namespace":"x","resourceVersion":"%d","labels":{"a":"b"}}}}`+"\n", i, i+2); err != nil {
				return
			}
			sent.Add(1)
		}
		<-r.Context().Done()
	})
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})

	peak := sampleHeap(t)
	createVR(t, ns, "flood", cmDoc("x"), toRemoteSecret(cluster.srv.URL))
	msg := readyMessageOf(t, ns, "flood", v1alpha1.ReasonDestinationError)
	if !strings.Contains(msg, "the remote clusters of namespace "+ns+" would make Vidra cache more than 30000 objects or 32 MiB") ||
		!strings.Contains(msg, "--destination-cache-objects") {
		t.Errorf("Ready message does not say the caches went over their budget: %s", msg)
	}
	// The informer let go of the watch: the stream was cut before its end.
	<-watchEnded
	if n := sent.Load(); n >= events {
		t.Errorf("the server sent all %d events; the watch should have ended past the budget", n)
	}
	lists := cluster.lists.Load()

	// Within the hold, a reconcile asked for lists nothing: it reports the
	// hold again. Its echo of the request is the barrier.
	at := askReconcile(t, ns, "flood")
	vr := waitVR(t, ns, "flood", "handled the reconcile asked for", func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.LastHandledReconcileAt == at
	})
	if n := cluster.lists.Load(); n != lists {
		t.Errorf("the cluster was listed %d times during its hold; want none", n-lists)
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "tries again in") {
		t.Errorf("the reconcile during the hold does not report it: %+v", c)
	}

	// Another Secret for the same server is another cluster, without a
	// hold of its own: it is refused as well, and lists nothing.
	createVRThroughAnotherSecret(t, ns, "again", cmDoc("y"), cluster.srv.URL)
	if msg := readyMessageOf(t, ns, "again", v1alpha1.ReasonDestinationError); !strings.Contains(msg, "watches no other cluster of the namespace until then") {
		t.Errorf("a resource of another Secret for the same server during the hold: %s", msg)
	}
	if n := cluster.lists.Load(); n != lists {
		t.Errorf("the cluster was listed %d times through another Secret during the hold; want none", n-lists)
	}

	before, highest, alloc := peak()
	if highest > before+heapBudget {
		t.Errorf("the heap in use grew from %d MiB to %d MiB while the server sent events, more than the budget of %d MiB", before>>20, highest>>20, heapBudget>>20)
	}
	t.Logf("%d events sent, %d lists; heap in use %d MiB before, at most %d MiB during; %d MiB allocated in all; Ready: %s",
		sent.Load(), cluster.lists.Load(), before>>20, highest>>20, alloc>>20, msg)

	// The hold ends (30 s); the resource is woken, its cluster listed and
	// watched again, and, the flood over, it is Ready.
	start := time.Now()
	waitVR(t, ns, "flood", "became Ready after the hold", isReady)
	if n := cluster.lists.Load(); n == lists {
		t.Error("the resource became Ready without its cluster being listed again")
	}
	t.Logf("Ready %v after the reconcile during the hold", time.Since(start).Round(100*time.Millisecond))
}

// TestRemoteWatchesCannotHoldTheOperatorsMemory: a tenant's server sends,
// on the watch of each of the kinds its resource declares, one delete of
// 2 MiB of an object it never sent (nothing is cached), then holds the
// watch open. client-go's decoders kept buffers of about twice the largest
// event for as long as a watch lasted: twenty such kinds held 174 MiB of
// the operator's heap, for good. Now a watch ends after an event over
// 64 KiB and is watched again, and what the streams hold is not kept.
func TestRemoteWatchesCannotHoldTheOperatorsMemory(t *testing.T) {
	const kinds, eventBytes = 10, 2 << 20
	var mu sync.Mutex
	watched := map[string]int{}
	cluster := newFakeCluster(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		watched[r.URL.Path]++
		first := watched[r.URL.Path] == 1
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		if first && thingsCollection.MatchString(r.URL.Path) {
			kind := "Thing" + strings.TrimPrefix(r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:], "things")
			fmt.Fprintf(w, `{"type":"DELETED","object":{"kind":%q,"apiVersion":"hostile.example/v1","metadata":{"name":"never-sent","namespace":"x","resourceVersion":"2","labels":{"a":"b"}},"spec":{"k":%q}}}`+"\n",
				kind, strings.Repeat("a", eventBytes))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	cluster.things = kinds
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})
	var manifest strings.Builder
	for i := range kinds {
		fmt.Fprintf(&manifest, "---\napiVersion: hostile.example/v1\nkind: Thing%d\nmetadata:\n  name: t\n", i)
	}

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	createVR(t, ns, "kinds", manifest.String(), toRemoteSecret(cluster.srv.URL))
	waitVR(t, ns, "kinds", "became Ready", isReady)
	// Every kind's watch ended after its large event and was watched again.
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		again := 0
		for path, n := range watched {
			if thingsCollection.MatchString(path) && n >= 2 {
				again++
			}
		}
		mu.Unlock()
		if again == kinds {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d kinds were watched again after their large event; watches: %v", again, kinds, watched)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// What the first streams decoded may still be on its way through the
	// informers and the test server's handlers: the heap must come back
	// down while the watches stay open, where the buffers of a watch kept
	// it up for as long as the watch lasted.
	var after runtime.MemStats
	var grew int64
	for settle := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		runtime.GC()
		runtime.ReadMemStats(&after)
		if grew = int64(after.HeapInuse) - int64(before.HeapInuse); grew <= 8<<20 || time.Now().After(settle) {
			break
		}
	}
	if grew > 8<<20 {
		t.Errorf("with %d watches open after a %d MiB event each, the heap in use stayed %d MiB up", kinds, eventBytes>>20, grew>>20)
	}
	t.Logf("heap in use %d MiB before, %d MiB with the watches open again (%+d MiB)", before.HeapInuse>>20, after.HeapInuse>>20, grew>>20)
}

// TestRemoteAnswersCannotPileUpInTheWorkers: a tenant's server answers the
// creation of each of its resources' ConfigMaps with an object just under
// the limits of one answer (7 MiB, 90,000 JSON values), and the tenant has
// a resource for every worker. Each worker held its answer, decoded, until
// its reconcile ended: four of them took the heap 95 to 131 MiB up. Now an
// answer about an object is bounded by the object's size in its manifest.
func TestRemoteAnswersCannotPileUpInTheWorkers(t *testing.T) {
	const answersBudget = 32 << 20
	const entries = 90_000
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, hangWatch)
	cluster.apply = func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		fmt.Fprintf(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"x","resourceVersion":"1","uid":"00000000-0000-0000-0000-000000000001"},"data":{`, name)
		value := strings.Repeat("v", 70)
		for i := range entries {
			if i > 0 {
				io.WriteString(w, ",")
			}
			fmt.Fprintf(w, `"k%d":%q`, i, value)
		}
		io.WriteString(w, "}}")
	}
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})

	peak := sampleHeap(t)
	for i := range operatorWorkers {
		createVR(t, ns, fmt.Sprintf("large-%d", i), cmDoc(fmt.Sprintf("large-%d", i)), toRemoteSecret(cluster.srv.URL))
	}
	for i := range operatorWorkers {
		waitVR(t, ns, fmt.Sprintf("large-%d", i), "reconciled", func(vr *v1alpha1.VidraResource) bool {
			return vr.Status.ObservedGeneration == vr.Generation
		})
	}
	before, highest, alloc := peak()
	for i := range operatorWorkers {
		// A refusal of the object's answer, not a failure of the server:
		// the object's error, under the reason of a failed apply.
		want := fmt.Sprintf("sent an answer about ConfigMap %s/large-%d over", ns, i)
		vr := waitVR(t, ns, fmt.Sprintf("large-%d", i), "reported the answer refused", func(vr *v1alpha1.VidraResource) bool {
			c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want)
		})
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		if i == 0 {
			t.Logf("Ready of large-0: %s: %s", c.Reason, c.Message)
		}
		if !strings.Contains(c.Message, "far beyond its manifest") || c.Reason == v1alpha1.ReasonDestinationError {
			t.Errorf("Ready of large-%d: %s: %s", i, c.Reason, c.Message)
		}
	}
	if highest > before+answersBudget {
		t.Errorf("the heap in use grew from %d MiB to %d MiB while %d workers read answers, more than %d MiB", before>>20, highest>>20, operatorWorkers, answersBudget>>20)
	}
	t.Logf("heap in use %d MiB before, at most %d MiB during (+%d MiB); %d MiB allocated in all",
		before>>20, highest>>20, (highest-before)>>20, alloc>>20)
}

// TestRemoteDiscoveryCannotFillTheOperatorsMemory: each remote cluster's
// RESTMapper keeps every resource its server serves, and a tenant names as
// many clusters as it has Secrets: five clusters of a server serving 28,000
// resources held 309 MiB. The discovery documents of a namespace's remote
// clusters now share a pool of 150,000 JSON values: a first cluster serving
// 8,000 kinds fits, a second one through another Secret is refused, and its
// resource says why.
func TestRemoteDiscoveryCannotFillTheOperatorsMemory(t *testing.T) {
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, hangWatch)
	cluster.things = 8000 // some 104,000 values
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})
	thing := "apiVersion: hostile.example/v1\nkind: Thing5\nmetadata:\n  name: t\n"

	createVR(t, ns, "first", thing, toRemoteSecret(cluster.srv.URL))
	waitVR(t, ns, "first", "became Ready", isReady)

	createVRThroughAnotherSecret(t, ns, "second", thing, cluster.srv.URL)
	want := "would make the remote clusters of namespace " + ns + " hold more than 150000 JSON values"
	vr := waitVR(t, ns, "second", "reported the discovery refused", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, want)
	})
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	t.Logf("Ready of the second: %s: %s", c.Reason, c.Message)
	// The first cluster goes on serving.
	waitVR(t, ns, "first", "still Ready", isReady)
}

// TestRemoteWatchEventsCannotTakeTheOperatorsCPU: a tenant's server streams
// events into a watch as fast as the operator reads them. 42,000 small
// events a second into one watch took 1.4 of the operator's cores, which
// every other tenant's drift correction waits on. The watch streams of a
// namespace's remote clusters are now read at 1,000 events a second, 10,000
// at once (an event counts one more for every KiB), and the server's writes
// wait on the connection. The server sends its flood, then an event over
// 64 KiB, after which the stream ends and the informer watches again: it
// cannot do so before it has read the flood at that pace, however fast the
// machine.
func TestRemoteWatchEventsCannotTakeTheOperatorsCPU(t *testing.T) {
	const (
		flood = 20_000
		// What the flood counts: some 200 bytes an event.
		units       = flood * 6 / 5
		rate, burst = 1000, 10_000
		paced       = time.Duration(units-burst) * time.Second / rate
	)
	start, again := make(chan struct{}), make(chan struct{})
	var sentAll atomic.Bool
	var once sync.Once
	cluster := newFakeCluster(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if !thingsCollection.MatchString(r.URL.Path) {
			<-r.Context().Done()
			return
		}
		if sentAll.Load() {
			once.Do(func() { close(again) })
			<-r.Context().Done()
			return
		}
		select {
		case <-start:
		case <-r.Context().Done():
			return
		}
		// Events of objects without an owner, which the operator decodes
		// and then drops, again and again.
		var chunk strings.Builder
		for i := range 100 {
			fmt.Fprintf(&chunk, `{"type":"MODIFIED","object":{"kind":"Thing0","apiVersion":"hostile.example/v1","metadata":{"name":"n%d","namespace":"x","resourceVersion":"%d","labels":{"a":"b"}},"spec":{"k":"%s"}}}`+"\n",
				i, i+2, strings.Repeat("a", 40))
		}
		for range flood / 100 {
			if _, err := io.WriteString(w, chunk.String()); err != nil {
				return
			}
		}
		fmt.Fprintf(w, `{"type":"DELETED","object":{"kind":"Thing0","apiVersion":"hostile.example/v1","metadata":{"name":"last","namespace":"x","resourceVersion":"2"},"spec":{"k":%q}}}`+"\n",
			strings.Repeat("a", 70<<10))
		w.(http.Flusher).Flush()
		sentAll.Store(true)
		<-r.Context().Done()
	})
	cluster.things = 1
	ns := remoteTenant(t, &clientcmdapi.Cluster{Server: cluster.srv.URL, CertificateAuthorityData: pemCertificate(cluster.srv)})
	createVR(t, ns, "flood", "apiVersion: hostile.example/v1\nkind: Thing0\nmetadata:\n  name: t\n  namespace: x\n", toRemoteSecret(cluster.srv.URL))
	waitVR(t, ns, "flood", "became Ready", isReady)

	cpuFrom, from := processCPU(t), time.Now()
	close(start)
	select {
	case <-again:
	case <-time.After(2 * time.Minute):
		t.Fatal("the informer did not watch again within 2 minutes of the flood")
	}
	took, cpu := time.Since(from), processCPU(t)-cpuFrom
	t.Logf("%d events and a large one read in %v; the test process used %.2f cores meanwhile", flood, took.Round(time.Millisecond), cpu.Seconds()/took.Seconds())
	if took < paced*9/10 {
		t.Errorf("the operator read %d events of one namespace's watch in %v; paced, that takes at least %v", flood, took.Round(time.Millisecond), paced)
	}
}

// processCPU returns the CPU time the test process, and the operator in it,
// has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
