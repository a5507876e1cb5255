// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The CRD bounds spec.manifest in bytes, with a message that says how to
// split: a manifest at the bound is accepted, one byte more is refused, and
// so are fewer characters that take more bytes.
func TestCRDRefusesAManifestOverTheBoundAndSaysHowToSplit(t *testing.T) {
	const head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crd-rules\n# "
	pad := func(n int, s string) string { return head + strings.Repeat(s, (n-len(head)-1)/len(s)) + "\n" }
	tests := []struct {
		name     string
		manifest string
		accepted bool
	}{
		{"at the bound", pad(v1alpha1.MaxManifestBytes, "x"), true},
		{"a byte over", pad(v1alpha1.MaxManifestBytes+1, "x"), false},
		{"the issue's 1.4 MB", pad(1400000, "x"), false},
		// 2 bytes each: as many characters as the bound allows bytes, at
		// twice the bytes.
		{"two-byte characters", pad(v1alpha1.MaxManifestBytes, "é") + strings.Repeat("é", v1alpha1.MaxManifestBytes/4), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := createDryRun(t, "manifest", tt.manifest)
			checkVerdict(t, err, fmt.Sprintf("a manifest of %d bytes", len(tt.manifest)), tt.accepted, "spec.manifest", v1alpha1.ManifestTooLargeMessage)
		})
	}
}

// bytesResources is how many resources the attack creates. The quota
// docs/multitenancy.md used to suggest was 200, but each resource costs a
// parse of 768 KiB, seconds under -race, twice (apply and cleanup): 60 keep
// the suite lean and still tell the two apart, since a cache holding the
// manifests grows by about 0.85 MiB per resource (+34 MiB for 40), 51 MiB
// for 60, past the budget, where one without them grows by a few MiB.
const bytesResources = 60

// paddedManifest is one ConfigMap followed by a YAML comment that pads it to
// exactly v1alpha1.MaxManifestBytes, the largest manifest the CRD accepts:
// it parses as one small object.
func paddedManifest(i int) string {
	head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: padded-%03d\ndata:\n  k: v\n# ", i)
	return head + strings.Repeat("x", v1alpha1.MaxManifestBytes-len(head)-1) + "\n"
}

// TestResourceCacheHoldsNoManifest: a tenant fills bytesResources resources
// with manifests of one ConfigMap padded by a comment to the largest the CRD
// accepts (45 MiB in all). The VidraResource informer held every one whole,
// on every replica, and a restart listed them all again: 200 of 1.4 MB took
// the operator past its memory limit. Its cache now keeps each resource
// without its manifest, and the operator's heap grows by a few MiB. The
// resources it reconciled keep their manifests: nothing wrote the cached
// copies back.
func TestResourceCacheHoldsNoManifest(t *testing.T) {
	const heapBudget = 30 << 20
	ns := tenantNamespace(t)
	drainOnCleanup(t, ns, 20*time.Minute)
	serviceAccount(t, ns, "deployer", ns)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// Created concurrently, by a few at a time: the API server and etcd
	// take each 768 KiB write in turn anyway. The test keeps none of the
	// text: each body is made, sent and dropped by its goroutine, and the
	// answer asked for is the metadata alone. The test runs in the
	// operator's process, whose CPU it shares: the body is written by hand
	// rather than by encoding/json, 768 KiB of which take a while under
	// -race.
	names := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, bytesResources)
	for range 8 {
		wg.Go(func() {
			for i := range names {
				name := fmt.Sprintf("padded-%03d", i)
				// The manifest needs no escaping but its line ends.
				body := fmt.Sprintf(`{"apiVersion":%q,"kind":"VidraResource","metadata":{"name":%q,"namespace":%q},"spec":{"serviceAccountName":"deployer","manifest":"%s"}}`,
					v1alpha1.SchemeGroupVersion.String(), name, ns, strings.ReplaceAll(paddedManifest(i), "\n", `\n`))
				_, err := vidra.InfrahubV1alpha1().RESTClient().Post().Namespace(ns).Resource(v1alpha1.ResourcePlural).
					SetHeader("Content-Type", "application/json").
					SetHeader("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").
					Body([]byte(body)).DoRaw(t.Context())
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
				}
			}
		})
	}
	for i := range bytesResources {
		names <- i
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The barrier: every resource Ready, each ConfigMap applied. Asked as a
	// table of the printer columns, which carries no manifest.
	start := time.Now()
	ready := 0
	// Each resource costs the operator a parse of 768 KiB (70 ms, seconds
	// under -race) and the decoding of each of its versions: a deadline
	// for a loaded machine.
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 25*time.Minute, true, func(ctx context.Context) (bool, error) {
		// A count the deadline cut short keeps the one before.
		if n, err := readyResources(ctx, ns); err == nil {
			ready = n
		}
		return ready == bytesResources, nil
	})
	if err != nil {
		t.Fatalf("%d of %d resources Ready after %s: %v", ready, bytesResources, time.Since(start).Round(time.Second), err)
	}
	t.Logf("%d resources of %d KiB Ready %s after their creation", bytesResources, v1alpha1.MaxManifestBytes>>10, time.Since(start).Round(time.Millisecond))

	// Transient buffers (the watch's decoding of each resource, the reads
	// of the manifests to parse) are garbage by now, or soon.
	var after runtime.MemStats
	var grew int64
	for settle := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		runtime.GC()
		runtime.ReadMemStats(&after)
		if grew = int64(after.HeapInuse) - int64(before.HeapInuse); grew <= heapBudget || time.Now().After(settle) {
			break
		}
	}
	t.Logf("heap in use %d MiB before, %d MiB after (%+d MiB); heap allocated %d MiB before, %d MiB after (%+d MiB)",
		before.HeapInuse>>20, after.HeapInuse>>20, grew>>20,
		before.HeapAlloc>>20, after.HeapAlloc>>20, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20)
	if grew > heapBudget {
		t.Errorf("the heap in use grew by %d MiB for %d resources of %d KiB, over the budget of %d MiB",
			grew>>20, bytesResources, v1alpha1.MaxManifestBytes>>10, heapBudget>>20)
	}

	// The operator added its finalizer and wrote the status from its
	// cached copies: the resources still hold their manifests, and never
	// saw the cache's own annotation.
	for _, i := range []int{0, bytesResources / 2, bytesResources - 1} {
		name := fmt.Sprintf("padded-%03d", i)
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vr.Spec.Manifest != paddedManifest(i) {
			t.Errorf("%s holds a manifest of %d bytes, want the %d written", name, len(vr.Spec.Manifest), len(paddedManifest(i)))
		}
		for k := range vr.Annotations {
			if strings.Contains(k, "cached-manifest") {
				t.Errorf("%s carries the cache's annotation %s", name, k)
			}
		}
		if len(vr.Finalizers) == 0 || len(vr.Status.ManagedResources) != 1 {
			t.Errorf("%s has finalizers %v and inventory %v, want the operator's and its ConfigMap", name, vr.Finalizers, vr.Status.ManagedResources)
		}
		if getObject(t, configMaps, ns, name) == nil {
			t.Errorf("ConfigMap %s was not applied", name)
		}
	}
}

// readyResources counts the VidraResources of ns whose Ready column says
// True, from the server's table of printer columns, without the objects.
func readyResources(ctx context.Context, ns string) (int, error) {
	raw, err := vidra.InfrahubV1alpha1().RESTClient().Get().Namespace(ns).Resource(v1alpha1.ResourcePlural).
		Param("includeObject", string(metav1.IncludeNone)).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		return 0, err
	}
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Ready" {
			col = i
		}
	}
	if col < 0 {
		return 0, fmt.Errorf("the table has no Ready column: %v", table.ColumnDefinitions)
	}
	n := 0
	for _, r := range table.Rows {
		if col < len(r.Cells) && r.Cells[col] == "True" {
			n++
		}
	}
	return n, nil
}
