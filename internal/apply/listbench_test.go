// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// envDeployment is a Deployment whose container "web" has the env vars
// e0..e{n-1} with the values value(i), followed by the vars added(i) for i
// below extra.
func envDeployment(n, extra int, value func(int) string) *unstructured.Unstructured {
	env := make([]any, 0, n+extra)
	for i := range n {
		env = append(env, map[string]any{"name": fmt.Sprintf("e%d", i), "value": value(i)})
	}
	for i := range extra {
		env = append(env, map[string]any{"name": fmt.Sprintf("a%d", i), "value": "added"})
	}
	d := deployment()
	d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"] = env
	return d
}

// envPath is the path of a field of the env var named name in envDeployment.
func envPath(name string, field ...any) fieldpath.Path {
	p := []any{"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "env", fieldpath.KeyByFields("name", name)}
	return fieldpath.MakePathOrDie(append(p, field...)...)
}

// handEditedEnv is a manifest of n env vars, the live object after a hand
// edit (kubectl edit) that set each of their values (to others when
// changed, else to the manifest's) or, when extra is not 0, added extra
// vars of its own instead, and the fields that edit owns.
func handEditedEnv(n, extra int, changed bool) (*planned, *unstructured.Unstructured, handEdits) {
	desired := envDeployment(n, 0, func(i int) string { return fmt.Sprintf("v%d", i) })
	live := envDeployment(n, extra, func(i int) string {
		if changed {
			return fmt.Sprintf("w%d", i)
		}
		return fmt.Sprintf("v%d", i)
	})
	set := &fieldpath.Set{}
	if extra == 0 {
		for i := range n {
			set.Insert(envPath(fmt.Sprintf("e%d", i), "value"))
		}
	}
	for i := range extra {
		name := fmt.Sprintf("a%d", i)
		set.Insert(envPath(name))
		set.Insert(envPath(name, "name"))
		set.Insert(envPath(name, "value"))
	}
	return &planned{obj: desired}, live, handEdits{names: []string{"kubectl-edit"}, fields: set}
}

func BenchmarkDriftOfHandEditedValues(b *testing.B) {
	p, live, h := handEditedEnv(benchmarkListItems, 0, true)
	now := time.Now()
	for b.Loop() {
		if r := driftOf(p, live, h, now); len(r.Fields) != maxDriftFields {
			b.Fatalf("drift of %d fields", len(r.Fields))
		}
	}
}

// Values set back to the manifest's by hand: no drift, but each field the
// hand edit owns is looked for in the manifest.
func BenchmarkDriftOfHandEditedValuesUndone(b *testing.B) {
	p, live, h := handEditedEnv(benchmarkListItems, 0, false)
	now := time.Now()
	for b.Loop() {
		if r := driftOf(p, live, h, now); len(r.Fields) != 0 {
			b.Fatalf("drift of %d fields", len(r.Fields))
		}
	}
}

func BenchmarkDriftOfHandAddedItems(b *testing.B) {
	p, live, h := handEditedEnv(benchmarkListItems, benchmarkListItems, false)
	now := time.Now()
	for b.Loop() {
		if r := driftOf(p, live, h, now); len(r.Fields) != maxDriftFields {
			b.Fatalf("drift of %d fields", len(r.Fields))
		}
	}
}

func BenchmarkCoveredByHandEditedValues(b *testing.B) {
	p, _, h := handEditedEnv(benchmarkListItems, 0, true)
	for b.Loop() {
		if !h.coveredBy(p.obj.Object) {
			b.Fatal("not covered")
		}
	}
}

func BenchmarkAddedMetadataKeysHandEditedValues(b *testing.B) {
	p, _, h := handEditedEnv(benchmarkListItems, 0, true)
	for b.Loop() {
		if _, ok := h.addedMetadataKeys(p.obj.Object); ok {
			b.Fatal("metadata keys added")
		}
	}
}

// The values of 2,048 ignored env vars, the last of the list, taken from
// the live object at an apply.
func BenchmarkWithIgnoredFromALongList(b *testing.B) {
	d := envDeployment(benchmarkListItems, 0, func(i int) string { return fmt.Sprintf("v%d", i) })
	live := envDeployment(benchmarkListItems, 0, func(i int) string { return fmt.Sprintf("w%d", i) })
	var paths []pointer
	for i := benchmarkListItems - 2048; i < benchmarkListItems; i++ {
		paths = append(paths, pointer{"spec", "template", "spec", "containers", "0", "env", fmt.Sprint(i), "value"})
	}
	ig := stripIgnored(d, paths)
	if len(ig.seeds) != 2048 {
		b.Fatalf("%d seeds", len(ig.seeds))
	}
	for b.Loop() {
		obj := d.DeepCopy().Object
		if !ig.withIgnored(obj, d.Object, live) {
			b.Fatal("nothing taken from live")
		}
	}
}
