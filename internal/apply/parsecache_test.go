package apply

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

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

	a, _ := pc.parse(key(0), vr(0, 1))
	b, _ := pc.parse(key(0), vr(0, 1))
	if &a[0] != &b[0] {
		t.Error("same generation parsed twice")
	}
	c, _ := pc.parse(key(0), vr(0, 2))
	if c[0].Object.GetName() != "c0-2" {
		t.Errorf("a new generation served the old parse: %s", c[0].Object.GetName())
	}
	for i := 1; i <= parseCacheSize; i++ {
		pc.parse(key(i), vr(i, 1))
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
