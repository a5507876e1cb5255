// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package sourcewatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

type woken struct {
	mu   sync.Mutex
	keys map[cache.ObjectName]int
}

func (w *woken) enqueue(k cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys[k]++
}

func (w *woken) of(k cache.ObjectName) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys[k]
}

func TestWatchIsSharedAndStopsWithItsLastUser(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = metav1.AddMetaToScheme(scheme)
	md := metadatafake.NewSimpleMetadataClient(scheme)
	wk := &woken{keys: map[cache.ObjectName]int{}}
	w := New(md, wk.enqueue)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	a, b := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "ns", Name: "b"}
	bundle := Object{Resource: configMaps, Namespace: "ns", Name: "bundle"}
	other := Object{Resource: configMaps, Namespace: "ns", Name: "other"}
	w.Set(a, []Object{bundle})
	w.Set(b, []Object{bundle, other})
	if n := w.Watching(); n != 2 {
		t.Fatalf("watching %d objects, want 2: bundle once for both resources, and other", n)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.HasSynced(a) && w.HasSynced(b), nil
	}); err != nil {
		t.Fatal("the watches never listed")
	}

	// A change of bundle wakes both of its users.
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "ns", ResourceVersion: "1"}}
	if _, err := md.Resource(configMaps).Namespace("ns").(metadatafake.MetadataClient).CreateFake(obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return wk.of(a) > 0 && wk.of(b) > 0, nil
	}); err != nil {
		t.Fatalf("woken %v, want both users of bundle", wk.keys)
	}

	w.Forget(a)
	if n := w.Watching(); n != 2 {
		t.Errorf("watching %d objects after one user of bundle left, want 2", n)
	}
	w.Set(b, []Object{other})
	if n := w.Watching(); n != 1 {
		t.Errorf("watching %d objects after the last user of bundle left, want 1", n)
	}
	w.Forget(b)
	if n := w.Watching(); n != 0 {
		t.Errorf("watching %d objects after every user left, want 0", n)
	}
}

// A namespace's resources may have Vidra watch so many objects, and the
// operator so many in all: past a bound a Set fails and changes nothing,
// other namespaces keep their room, and what is watched already may be
// kept or dropped.
func TestSetKeepsTheBounds(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = metav1.AddMetaToScheme(scheme)
	w := New(metadatafake.NewSimpleMetadataClient(scheme), func(cache.ObjectName) {})
	w.perNamespace, w.total = 3, 5
	objs := func(ns string, names ...string) []Object {
		var out []Object
		for _, n := range names {
			out = append(out, Object{Resource: configMaps, Namespace: ns, Name: n})
		}
		return out
	}
	a, b, c := cache.ObjectName{Namespace: "team-a", Name: "a"}, cache.ObjectName{Namespace: "team-a", Name: "b"}, cache.ObjectName{Namespace: "team-b", Name: "c"}
	steps := []struct {
		name    string
		key     cache.ObjectName
		objs    []Object
		wantErr string
		watched int
	}{
		{"within the namespace's bound", a, objs("team-a", "1", "2"), "", 2},
		{"a shared object costs nothing more", b, objs("team-a", "2", "2"), "", 2},
		{"past the namespace's bound", b, objs("team-a", "2", "3", "4"), "would have Vidra watch 4 sources of manifests (spec.manifestFrom), more than the 3 a namespace may", 2},
		{"another namespace keeps its room", c, objs("team-b", "1", "2", "3"), "", 5},
		{"past the total", b, objs("team-a", "3"), "would watch 6 sources of manifests, more than the 5 it watches in all", 5},
		{"what is watched may be kept", a, objs("team-a", "2", "1"), "", 5},
		{"and dropped", c, nil, "", 2},
	}
	for _, s := range steps {
		err := w.Set(s.key, s.objs)
		if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
			t.Fatalf("%s: err %v, want %q", s.name, err, s.wantErr)
		}
		if n := w.Watching(); n != s.watched {
			t.Fatalf("%s: watching %d, want %d", s.name, n, s.watched)
		}
	}
}
