package apply

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestAuditLiveAtScan(t *testing.T) {
	for _, n := range []int{5000, 10000, 20000} {
		list := make([]any, n)
		for i := range n {
			list[i] = map[string]any{"name": fmt.Sprintf("i%d", i), "a": "v"}
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "t"}, "spec": map[string]any{"items": list}}}
		live := obj.DeepCopy()
		var paths []string
		for k := range 2048 {
			paths = append(paths, fmt.Sprintf("/spec/items/%d/a", n-1-k))
		}
		var rules []v1alpha1.IgnoreRule
		for i := 0; i < 2048; i += 32 {
			rules = append(rules, v1alpha1.IgnoreRule{Paths: paths[i : i+32]})
		}
		rs, errs := compileIgnore(rules)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		u := obj.DeepCopy()
		ig := rs.strip(u)
		start := time.Now()
		out := u.DeepCopy().Object
		ig.withIgnored(out, u.Object, live)
		t.Logf("n=%d seeds=%d withIgnored=%v", n, len(ig.seeds), time.Since(start))
	}
}
