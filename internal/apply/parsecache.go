package apply

import (
	"container/list"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// parseCacheSize bounds the parsed manifests kept between reconciles. Parsed
// objects take several times the room of the manifest text, and a resource
// whose drift is being corrected reconciles again soon while the others sit
// idle for an interval: a small cache of the recently used ones keeps event
// reconciles from parsing again without holding every manifest twice.
const parseCacheSize = 256

type parsed struct {
	key        cache.ObjectName
	uid        types.UID
	generation int64
	objects    []manifest.Object
	errs       manifest.ErrorList
}

// parseCache is a least-recently-used cache of parsed manifests, keyed by
// resource and valid for one UID and generation. The objects it returns are
// shared: callers copy before changing them (Resolve and mark do).
type parseCache struct {
	mu    sync.Mutex
	ll    *list.List
	items map[cache.ObjectName]*list.Element
}

func newParseCache() *parseCache {
	return &parseCache{ll: list.New(), items: map[cache.ObjectName]*list.Element{}}
}

func (pc *parseCache) parse(key cache.ObjectName, vr *v1alpha1.VidraResource) ([]manifest.Object, manifest.ErrorList) {
	pc.mu.Lock()
	if el, ok := pc.items[key]; ok {
		p := el.Value.(*parsed)
		if p.uid == vr.UID && p.generation == vr.Generation {
			pc.ll.MoveToFront(el)
			pc.mu.Unlock()
			return p.objects, p.errs
		}
	}
	pc.mu.Unlock()

	// Parse outside the lock: other workers parse other manifests meanwhile.
	objs, errs := manifest.Parse(vr.Spec.Manifest)

	pc.mu.Lock()
	defer pc.mu.Unlock()
	p := &parsed{key: key, uid: vr.UID, generation: vr.Generation, objects: objs, errs: errs}
	if el, ok := pc.items[key]; ok {
		el.Value = p
		pc.ll.MoveToFront(el)
	} else {
		pc.items[key] = pc.ll.PushFront(p)
	}
	for pc.ll.Len() > parseCacheSize {
		last := pc.ll.Back()
		pc.ll.Remove(last)
		delete(pc.items, last.Value.(*parsed).key)
	}
	return objs, errs
}

func (pc *parseCache) forget(key cache.ObjectName) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if el, ok := pc.items[key]; ok {
		pc.ll.Remove(el)
		delete(pc.items, key)
	}
}
