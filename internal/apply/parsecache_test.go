// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestParseCacheReusesAndEvicts(t *testing.T) {
	pc := newParseCache()
	vr := func(i int, gen int64) *v1alpha1.VidraResource {
		return &v1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint("uid-", i)), Generation: gen},
			Spec:       v1alpha1.VidraResourceSpec{Manifest: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d-%d\n", i, gen)},
		}
	}
	key := func(i int) cache.ObjectName { return cache.ObjectName{Namespace: "ns", Name: fmt.Sprint(i)} }

	a, _ := parseVR(t, pc, key(0), vr(0, 1))
	b, _ := parseVR(t, pc, key(0), vr(0, 1))
	if &a[0] != &b[0] {
		t.Error("same generation parsed twice")
	}
	c, _ := parseVR(t, pc, key(0), vr(0, 2))
	if c[0].Object.GetName() != "c0-2" {
		t.Errorf("a new generation served the old parse: %s", c[0].Object.GetName())
	}
	for i := 1; i <= parseCacheSize; i++ {
		parseVR(t, pc, key(i), vr(i, 1))
	}
	if len(pc.items) != parseCacheSize || pc.ll.Len() != parseCacheSize {
		t.Fatalf("cache holds %d (%d), want %d", len(pc.items), pc.ll.Len(), parseCacheSize)
	}
	if _, ok := pc.items[key(0)]; ok {
		t.Error("the least recently used entry was not evicted")
	}
	pc.forget(key(1))
	if _, ok := pc.items[key(1)]; ok {
		t.Error("forget kept the entry")
	}
}

// tinyMaps is a valid manifest of n tiny maps: 7 bytes of text each, and
// some 350 bytes each once parsed, the most a manifest holds for its size.
func tinyMaps(n int) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n" + strings.Repeat("- a: 1\n", n)
}

// heapHeldBy returns the bytes of heap that what f returns keeps live.
func heapHeldBy(f func() any) (any, int) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return v, int(after.HeapAlloc) - int(before.HeapAlloc)
}

// TestParseCacheEstimatesWhatAParseHolds checks heldBytes against the heap
// for the manifests that hold the most for their size, and for ordinary ones:
// the cache's bound in bytes is only as good as this estimate.
func TestParseCacheEstimatesWhatAParseHolds(t *testing.T) {
	var keys, objects strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&keys, "  k%d: 0\n", i)
	}
	for i := range 500 {
		fmt.Fprintf(&objects, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-%d\n  labels:\n    app: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n        ports:\n        - containerPort: 8080\n        resources:\n          limits:\n            cpu: 500m\n            memory: 128Mi\n", i)
	}
	const header = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n"
	for _, tt := range []struct{ name, manifest string }{
		{"tiny maps", tinyMaps(10000)},
		{"a large map", header + keys.String()},
		{"large integers", header + strings.Repeat("- 100000\n", 50000)},
		{"nulls", header + strings.Repeat("-\n", 100000)},
		{"a long string", header + "  a: " + strings.Repeat("x", 1<<20) + "\n"},
		{"short strings", header + strings.Repeat("- ab\n", 100000)},
		{"strings of a size class's edge", header + strings.Repeat("- abcdefghijklmnopq\n", 50000)},
		{"500 Deployments", objects.String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, held := heapHeldBy(func() any {
				objs, errs := manifest.Parse(tt.manifest)
				if len(errs) > 0 {
					t.Fatalf("Parse() = %v", errs)
				}
				return objs
			})
			est := heldBytes(v.([]manifest.Object), nil)
			t.Logf("%d bytes of text hold %d KiB, estimated %d KiB", len(tt.manifest), held>>10, est>>10)
			if r := float64(est) / float64(held); r < 0.9 || r > 1.5 {
				t.Errorf("heldBytes() = %d KiB for %d KiB held (%.2f times)", est>>10, held>>10, r)
			}
		})
	}
}

// TestParseCacheBoundsTheBytesItHolds parses, for as many resources, the
// manifests a tenant would write to fill the operator's memory through the
// cache, against a bound of 8 MiB: without a bound in bytes, all 30 stayed
// live, 40 MiB (at the operator's bound of 32 MiB, 30 manifests of 15,000
// maps held 150 MiB).
func TestParseCacheBoundsTheBytesItHolds(t *testing.T) {
	pc := newParseCache()
	pc.maxBytes = 8 << 20
	vr := func(i int, text string) *v1alpha1.VidraResource {
		return &v1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint("uid-", i)), Generation: 1},
			Spec:       v1alpha1.VidraResourceSpec{Manifest: text},
		}
	}
	key := func(i int) cache.ObjectName { return cache.ObjectName{Namespace: "ns", Name: fmt.Sprint(i)} }

	text := tinyMaps(3000)
	_, held := heapHeldBy(func() any {
		for i := range 30 {
			parseVR(t, pc, key(i), vr(i, text))
		}
		return nil
	})
	t.Logf("30 manifests of %d bytes: the cache holds %d entries, %d KiB by its count, %d KiB of heap", len(text), len(pc.items), pc.bytes>>10, held>>10)
	if pc.bytes > pc.maxBytes {
		t.Errorf("the cache counts %d KiB, over its bound of %d KiB", pc.bytes>>10, pc.maxBytes>>10)
	}
	if held > pc.maxBytes*3/2 {
		t.Errorf("the cache keeps %d KiB of heap live, over 1.5 times its bound of %d KiB", held>>10, pc.maxBytes>>10)
	}
	if len(pc.items) < 4 {
		t.Errorf("the cache keeps %d of these manifests, want as many as fit", len(pc.items))
	}

	huge := vr(100, tinyMaps(6000))
	a, _ := parseVR(t, pc, key(100), huge)
	b, _ := parseVR(t, pc, key(100), huge)
	if &a[0] == &b[0] {
		t.Error("a manifest over a quarter of the bound was cached")
	}
	if _, ok := pc.items[key(100)]; ok {
		t.Error("a manifest over a quarter of the bound has an entry")
	}

	sum := 0
	for el := pc.ll.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*parsed).bytes
	}
	if sum != pc.bytes {
		t.Errorf("entries hold %d bytes, the cache counts %d", sum, pc.bytes)
	}
	for i := range 30 {
		pc.forget(key(i))
	}
	if pc.bytes != 0 || len(pc.items) != 0 {
		t.Errorf("after forgetting every key the cache counts %d bytes in %d entries", pc.bytes, len(pc.items))
	}
}
