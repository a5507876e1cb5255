package apply

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A Deployment-like object whose manifest has n env entries, all of whose
// values a kubectl-edit update changed (so kubectl-edit owns them).
func auditHandEditObjects(n int) (*planned, *unstructured.Unstructured) {
	env := make([]any, n)
	liveEnv := make([]any, n)
	var fv bytes.Buffer
	fv.WriteString(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{"f:env":{`)
	for i := range n {
		name := fmt.Sprintf("E%d", i)
		env[i] = map[string]any{"name": name, "value": "a"}
		liveEnv[i] = map[string]any{"name": name, "value": "b"}
		if i > 0 {
			fv.WriteString(",")
		}
		fmt.Fprintf(&fv, `"k:{\"name\":\"%s\"}":{"f:value":{}}`, name)
	}
	fv.WriteString(`}}}}}}}`)
	mk := func(e []any) map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "team-a"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "c", "image": "x", "env": e}}}}}}
	}
	p := &planned{obj: &unstructured.Unstructured{Object: mk(env)}}
	live := &unstructured.Unstructured{Object: mk(liveEnv)}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fv.Bytes()}}})
	return p, live
}

func TestAuditHandEditQuadratic(t *testing.T) {
	for _, n := range []int{1000, 2000, 4000} {
		p, live := auditHandEditObjects(n)
		start := time.Now()
		hand := parseHandEdits(live.GetManagedFields(), []string{"kubectl-edit"}, p.notIgnored)
		tParse := time.Since(start)
		start = time.Now()
		d := driftOf(p, live, hand, time.Now())
		tDrift := time.Since(start)
		start = time.Now()
		cov := hand.coveredBy(p.obj.Object)
		tCov := time.Since(start)
		start = time.Now()
		_, ok := hand.addedMetadataKeys(p.obj.Object)
		tAdded := time.Since(start)
		t.Logf("n=%d parse=%v driftOf=%v (fields %d) coveredBy=%v(%v) addedMetadataKeys=%v(%v)", n, tParse, tDrift, len(d.Fields), tCov, cov, tAdded, ok)
	}
}

// Variant: the hand-edit manager added n env entries that the manifest does
// not have (manifest holds n too, different names): every leaf is "added".
func TestAuditHandEditAddedLeaves(t *testing.T) {
	for _, n := range []int{1000, 2000, 4000} {
		p, live := auditHandEditObjects(n)
		// rename the live field set's keys so that none is in the manifest
		mf := live.GetManagedFields()
		mf[0].FieldsV1.Raw = bytes.ReplaceAll(mf[0].FieldsV1.Raw, []byte(`\"E`), []byte(`\"X`))
		live.SetManagedFields(mf)
		envs := live.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"].([]any)
		for i := range envs {
			envs[i].(map[string]any)["name"] = fmt.Sprintf("X%d", i)
		}
		hand := parseHandEdits(live.GetManagedFields(), []string{"kubectl-edit"}, p.notIgnored)
		start := time.Now()
		d := driftOf(p, live, hand, time.Now())
		t.Logf("n=%d added-leaves driftOf=%v (fields %d)", n, time.Since(start), len(d.Fields))
	}
}
