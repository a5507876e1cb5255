// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// TestConcurrentTrackForgetAndLingerExpiryStayConsistent hammers Track and
// Forget from several goroutines, and from inside Map, while a 2ms linger
// keeps expiring informers, the scope widens and objects keep changing. Under -race it proves
// the locking; the invariant checks prove that a ref an owner holds always
// has a live informer, never a stopped one; and the deadline proves that
// nothing deadlocks.
func TestConcurrentTrackForgetAndLingerExpiryStayConsistent(t *testing.T) {
	c := newClients(t, controlPlane(t))
	var namespaces []string
	for range 4 {
		namespaces = append(namespaces, newNamespace(t, c.cs))
	}
	var refs []watchregistry.Ref
	for _, ns := range namespaces {
		refs = append(refs, watchregistry.Ref{GVR: configMaps, Namespace: ns}, watchregistry.Ref{GVR: secrets, Namespace: ns})
	}

	var r *watchregistry.Registry[string]
	var mapCalls, mapForgets atomic.Int64
	var quiet atomic.Bool
	mapFunc := func(ev watchregistry.Event) []string {
		mapCalls.Add(1)
		if quiet.Load() {
			return testMap(ev)
		}
		// Track and Forget from inside Map: owners "victim-*" are only ever
		// touched here and by the victim goroutine below.
		victim := fmt.Sprintf("victim-%d", rand.IntN(3))
		if rand.IntN(2) == 0 {
			r.Forget(victim)
			mapForgets.Add(1)
		} else if err := r.Track(victim, []watchregistry.Ref{refs[rand.IntN(len(refs))]}); err != nil && !errors.Is(err, watchregistry.ErrStopped) {
			t.Errorf("Track from Map: %v", err)
		}
		return testMap(ev)
	}
	r = newRegistry(t, c, watchregistry.Options[string]{
		Enqueue: func(string, watchregistry.Event) {},
		Map:     mapFunc,
		Linger:  2 * time.Millisecond,
	})
	base := runtime.NumGoroutine()
	stopRun := run(t, r)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	const workers, rounds, minStarts = 6, 100, 40
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			// Pace the rounds so that refs go idle for longer than the linger
			// now and then, and expire while others are being tracked.
			pace := time.NewTicker(time.Millisecond)
			defer pace.Stop()
			// Run the rounds, and on until informers have been stopped by
			// linger and restarted many times over.
			for i := 0; i < rounds || r.Stats().Started < minStarts; i++ {
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
				if rand.IntN(3) == 0 {
					r.Forget(owner)
					continue
				}
				set := randomSubset(refs)
				if err := r.Track(owner, set); err != nil {
					t.Errorf("Track: %v", err)
					return
				}
				// Only this goroutine changes this owner's set, so its refs
				// must be live now, whatever the others and the linger do.
				for _, ref := range set {
					if st := r.State(ref); st != watchregistry.StatePending && st != watchregistry.StateSynced {
						t.Errorf("owner %s holds %s in state %s", owner, ref, st)
						return
					}
					_, err := r.Get(ref, ref.Namespace, "x")
					if errors.Is(err, watchregistry.ErrStopped) || errors.Is(err, watchregistry.ErrNotTracked) {
						t.Errorf("Get of a held ref: %v", err)
						return
					}
				}
				if i%10 == 0 {
					if err := watchregistry.CheckInvariants(r); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	// Victims, tracked here and forgotten from Map.
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < rounds; i++ {
			if err := r.Track(fmt.Sprintf("victim-%d", i%3), randomSubset(refs)); err != nil {
				t.Errorf("Track victim: %v", err)
				return
			}
			runtime.Gosched()
		}
	})
	// The scope widens now and then: every entry, live, lingering or being
	// stopped, gets an informer more, and owners' refs are Pending again
	// (never Stopped) until it lists. Every other time the added selector
	// was prepared first, with a spare that the next Prepare stops.
	var widened atomic.Int64
	wg.Go(func() {
		sels := []string{selector}
		for i := range 5 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			next := fmt.Sprintf("%s,widened in (w%d)", selector, i)
			if i%2 == 0 {
				if err := r.Prepare(next, fmt.Sprintf("%s,widened in (spare%d)", selector, i)); err != nil {
					t.Errorf("Prepare: %v", err)
					return
				}
				runtime.Gosched()
			}
			sels = append(sels, next)
			if err := r.SetLabelSelectors(sels...); err != nil {
				t.Errorf("SetLabelSelectors: %v", err)
				return
			}
			widened.Add(1)
		}
	})
	// Events, so that Map runs concurrently with everything else.
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 60; i++ {
			ns := namespaces[i%len(namespaces)]
			cm := configMap(ns, fmt.Sprintf("churn-%d", i%7), "w0", map[string]string{"i": fmt.Sprint(i)})
			_, err := c.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				_, err = c.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("churn: %v", err)
				return
			}
		}
	})

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		buf := make([]byte, 1<<20)
		t.Fatalf("deadlock: workers did not finish\n%s", buf[:runtime.Stack(buf, true)])
	}
	if ctx.Err() != nil {
		t.Fatal("workers ran out of time: the registry is too slow or stuck")
	}
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
	if widened.Load() != 5 {
		t.Fatalf("the scope widened %d times, want 5", widened.Load())
	}
	if mapCalls.Load() == 0 || mapForgets.Load() == 0 {
		t.Fatalf("Map ran %d times with %d Forgets; the test did not exercise Forget from Map", mapCalls.Load(), mapForgets.Load())
	}

	// Everyone leaves: every informer lingers, expires and exits. A Map call
	// in flight may still track a victim once, hence the loop.
	quiet.Store(true)
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		for w := range workers {
			r.Forget(fmt.Sprintf("w%d", w))
		}
		for v := range 3 {
			r.Forget(fmt.Sprintf("victim-%d", v))
		}
		s := r.Stats()
		return s.Owners == 0 && s.Running == 0 && len(nonZero(s.Informers)) == 0, nil
	})
	if err != nil {
		t.Fatalf("informers left after every owner left: %+v", r.Stats())
	}
	t.Logf("informers started: %d, Map calls: %d (%d Forgets)", r.Stats().Started, mapCalls.Load(), mapForgets.Load())
	stopRun()
	waitGoroutines(t, base, 2)
}

func randomSubset(refs []watchregistry.Ref) []watchregistry.Ref {
	var out []watchregistry.Ref
	for _, ref := range refs {
		if rand.IntN(4) == 0 {
			out = append(out, ref)
		}
	}
	return out
}
