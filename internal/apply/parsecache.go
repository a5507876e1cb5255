// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"container/list"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/manifest"
)

// parseCacheSize and parseCacheBytes bound the parsed manifests kept between
// reconciles. Parsed objects take several times the room of the manifest
// text, and a resource whose drift is being corrected reconciles again soon
// while the others sit idle for an interval: a small cache of the recently
// used ones keeps event reconciles from parsing again without holding every
// manifest twice.
//
// The count alone does not bound the memory: within the manifest bounds a
// tenant may write 175 KB of tiny maps that parse into 8.6 MiB, and 256 of
// them would hold over 2 GiB. The bytes do: 256 resources of the bench's
// four objects take about 2 MiB, so 32 MiB binds only when manifests are
// large, and still keeps four of the largest. A manifest
// that parses into more than a quarter of it is parsed again each time
// rather than cached, so that one resource cannot take the cache from all
// the others; it is also rate limited like every retry of its namespace.
//
// The bound is shared by every tenant: one tenant's large manifests can push
// out the parses of others. That costs them, at their next reconcile, a
// GET of their resource (the informer holds no manifest: StripManifest) and
// a parse, never memory.
const (
	parseCacheSize  = 256
	parseCacheBytes = 32 << 20
)

type parsed struct {
	key     cache.ObjectName
	uid     types.UID
	sum     manifestSum
	objects []manifest.Object
	errs    manifest.ErrorList
	bytes   int
}

// parseCache is a least-recently-used cache of parsed manifests, keyed by
// resource and valid for one UID and one manifest text, known by its
// SHA-256 (manifestSum): a change of another field of the spec, which
// raises the generation too, parses nothing again. The objects it returns
// are shared: callers copy before changing them (Resolve and mark do).
type parseCache struct {
	mu       sync.Mutex
	ll       *list.List
	items    map[cache.ObjectName]*list.Element
	bytes    int
	maxBytes int
}

func newParseCache() *parseCache {
	return &parseCache{ll: list.New(), items: map[cache.ObjectName]*list.Element{}, maxBytes: parseCacheBytes}
}

// get returns the parse of the manifest of key whose UID and text's sum are
// those given, if the cache holds it.
func (pc *parseCache) get(key cache.ObjectName, uid types.UID, sum manifestSum) ([]manifest.Object, manifest.ErrorList, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if el, ok := pc.items[key]; ok {
		if p := el.Value.(*parsed); p.uid == uid && p.sum == sum {
			pc.ll.MoveToFront(el)
			return p.objects, p.errs, true
		}
	}
	return nil, nil, false
}

// parse parses text, the manifest of key of that UID whose sum is given,
// and keeps the result in place of any other of key.
func (pc *parseCache) parse(key cache.ObjectName, uid types.UID, sum manifestSum, text string) ([]manifest.Object, manifest.ErrorList) {
	// Parse outside the lock: other workers parse other manifests meanwhile.
	objs, errs := manifest.Parse(text)
	size := heldBytes(objs, errs)

	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.removeLocked(key)
	if size > pc.maxBytes/4 {
		return objs, errs
	}
	p := &parsed{key: key, uid: uid, sum: sum, objects: objs, errs: errs, bytes: size}
	pc.items[key] = pc.ll.PushFront(p)
	pc.bytes += size
	for pc.ll.Len() > parseCacheSize || pc.bytes > pc.maxBytes {
		pc.removeLocked(pc.ll.Back().Value.(*parsed).key)
	}
	return objs, errs
}

func (pc *parseCache) forget(key cache.ObjectName) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.removeLocked(key)
}

func (pc *parseCache) removeLocked(key cache.ObjectName) {
	if el, ok := pc.items[key]; ok {
		pc.ll.Remove(el)
		delete(pc.items, key)
		pc.bytes -= el.Value.(*parsed).bytes
	}
}

// heldBytes estimates the heap a parse result holds, from the values it is
// made of as the runtime lays them out (TestParseCacheEstimatesWhatAParseHolds
// checks it against the heap): a map costs about 100 bytes an entry once it
// outgrows its first group of eight, small integers and booleans cost
// nothing beyond their slot, other numbers are boxed in 16 bytes, strings
// take a header besides their text.
func heldBytes(objs []manifest.Object, errs manifest.ErrorList) int {
	n := 0
	for _, o := range objs {
		n += 160
		if o.Object != nil {
			n += valueBytes(o.Object.Object)
		}
	}
	for _, e := range errs {
		n += 160 + len(e.Field) + len(e.Message)
	}
	return n
}

func valueBytes(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 432
		if len(v) > 8 {
			n = 100 * len(v)
		}
		for k, x := range v {
			n += len(k) + valueBytes(x)
		}
		return n
	case []any:
		n := 24 + 16*cap(v)
		for _, x := range v {
			n += valueBytes(x)
		}
		return n
	case string:
		// A string in an interface is a 16-byte header of its own, and
		// its text, in 8-byte steps of 16 at least; "" costs nothing.
		if v == "" {
			return 0
		}
		return 16 + max(16, (len(v)+7)&^7)
	case int64:
		if v >= 0 && v < 256 {
			return 0
		}
		return 16
	case float64:
		return 16
	}
	return 0
}
