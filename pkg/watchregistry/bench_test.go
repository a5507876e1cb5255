// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// BenchmarkEventToEnqueueLatency measures, against the real API server, the
// time from just before a client writes a managed object (a ConfigMap data
// change, the kind of drift that generation-based filters miss) to the
// registry's Enqueue of its owner.
func BenchmarkEventToEnqueueLatency(b *testing.B) {
	// The harness's client limit (200/s) would pace the writes of a long run
	// and be measured as their latency.
	cfg := rest.CopyConfig(controlPlane(b))
	cfg.QPS, cfg.Burst = 1e6, 1e6
	c := newClients(b, cfg)
	ns := newNamespace(b, c.cs)
	enqueued := make(chan time.Time, 1)
	r := startRegistry(b, c, watchregistry.Options[string]{
		Enqueue: func(_ string, ev watchregistry.Event) {
			if ev.Type == watchregistry.EventUpdated {
				enqueued <- time.Now()
			}
		},
	})
	createConfigMap(b, c.cs, configMap(ns, "drift", "owner", map[string]string{"k": "0"}))
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(b, r, "owner", ref)
	waitState(b, r, ref, watchregistry.StateSynced)

	var latencies, writes []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		patchConfigMap(b, c.cs, ns, "drift", fmt.Sprintf(`{"data":{"k":"%d"}}`, i))
		writes = append(writes, time.Since(start))
		select {
		case at := <-enqueued:
			latencies = append(latencies, at.Sub(start))
		case <-time.After(waitFor):
			b.Fatal("no enqueue for a data change")
		}
	}
	b.ReportMetric(quantileMs(latencies, 0.50), "p50-ms")
	b.ReportMetric(quantileMs(latencies, 0.99), "p99-ms")
	// For scale: the write request alone, which the latency includes.
	b.ReportMetric(quantileMs(writes, 0.50), "write-p50-ms")
}

func quantileMs(d []time.Duration, q float64) float64 {
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
}

// BenchmarkHeapPerCachedObject measures the heap an informer's cache costs
// per object, for ConfigMaps as an operator leaves them: written by
// server-side apply (managedFields) and carrying kubectl's last-applied
// annotation, as objects first created with `kubectl apply` do.
func BenchmarkHeapPerCachedObject(b *testing.B) {
	const objects = 1000
	c := newClients(b, controlPlane(b))
	ns := newNamespace(b, c.cs)
	createApplied(b, c, ns, objects)
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	kindFor := func(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
		return gvr.GroupVersion().WithKind("ConfigMap"), nil
	}

	for _, mode := range []struct {
		name string
		opts watchregistry.Options[string]
	}{
		{"transform=drop-managed-fields", watchregistry.Options[string]{}},
		{"transform=none", watchregistry.Options[string]{Transform: watchregistry.AsServed}},
		{"metadata-only", watchregistry.Options[string]{MetadataOnly: true, KindFor: kindFor}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var perObject float64
			for b.Loop() {
				before := heapAlloc()
				opts := mode.opts
				opts.Enqueue = func(string, watchregistry.Event) {}
				r := newRegistry(b, c, opts)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { r.Run(ctx); close(done) }()
				track(b, r, "owner", ref)
				waitState(b, r, ref, watchregistry.StateSynced)
				if n := r.Stats().CachedObjects; n != objects {
					b.Fatalf("cached %d objects, want %d", n, objects)
				}
				after := heapAlloc()
				perObject = float64(after-before) / objects
				runtime.KeepAlive(r)
				cancel()
				<-done
			}
			b.ReportMetric(perObject, "heap-B/object")
		})
	}
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// createApplied creates n ConfigMaps by server-side apply, each with a
// last-applied annotation holding a copy of itself.
func createApplied(b *testing.B, c clients, ns string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("cm-%04d", i)
			data := map[string]string{
				"app.properties": "server.port=8080\nlog.level=info\nfeature.flags=a,b,c\n",
				"owner":          "team-" + fmt.Sprint(i%7),
				"replicas":       "3",
				"endpoint":       "https://api.example.com/v1/items",
			}
			labels := map[string]string{managedBy: "watchregistry-test", ownerLabel: "owner", "app.kubernetes.io/name": "bench"}
			lastApplied, _ := json.Marshal(map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "data": data,
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
			})
			ac := corev1ac.ConfigMap(name, ns).
				WithLabels(labels).
				WithAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)}).
				WithData(data)
			if _, err := c.cs.CoreV1().ConfigMaps(ns).Apply(context.Background(), ac, metav1.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkGoroutinesPerInformer measures the goroutines a running informer
// costs, over 20 informers (ConfigMaps of 20 namespaces).
func BenchmarkGoroutinesPerInformer(b *testing.B) {
	const informers = 20
	c := newClients(b, controlPlane(b))
	var refs []watchregistry.Ref
	for range informers {
		refs = append(refs, watchregistry.Ref{GVR: configMaps, Namespace: newNamespace(b, c.cs)})
	}
	r := startRegistry(b, c, watchregistry.Options[string]{Enqueue: func(string, watchregistry.Event) {}, Linger: 10 * time.Millisecond})
	// Warm up: the connection and client-go's lazily started goroutines.
	track(b, r, "owner", refs[0])
	waitState(b, r, refs[0], watchregistry.StateSynced)
	r.Forget("owner")
	waitRunning(b, r, 0)

	var perInformer float64
	for b.Loop() {
		base := runtime.NumGoroutine()
		track(b, r, "owner", refs...)
		for _, ref := range refs {
			waitState(b, r, ref, watchregistry.StateSynced)
		}
		// Let the goroutines that only wait for the sync finish.
		var n int
		_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
			prev := n
			n = runtime.NumGoroutine()
			return n == prev, nil
		})
		perInformer = float64(n-base) / informers
		r.Forget("owner")
		waitRunning(b, r, 0)
	}
	b.ReportMetric(perInformer, "goroutines/informer")
}
