// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// gzipBomb returns about size bytes of gzip data that expand more than a
// thousand times: one member, 16 MiB of zeros, repeated (a gzip reader
// reads every member of a stream, one after the other).
func gzipBomb(t *testing.T, size int) (data []byte, expands int64) {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, 16<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	n := size / member.Len()
	return bytes.Repeat(member.Bytes(), n), int64(n) * 16 << 20
}

// A tenant puts gzip bombs in ConfigMaps its resource reads: two of just
// under 1 MiB, each expanding to almost 1 GiB. The operator refuses them
// at the bound of a whole manifest (3 MiB, decompressed), never expanding
// them, with ManifestTooLarge naming the key; its heap grows by less than
// 20 MiB, and what it allocates in all, while the resource is retried, is
// a small fraction of one bomb.
func TestGzipBombInConfigMapIsRefusedAtTheBound(t *testing.T) {
	const heapBound = 20 << 20
	ns := tenant(t)
	bomb, expands := gzipBomb(t, 1000<<10)
	t.Logf("each bomb: %d KiB of gzip expanding to %d MiB", len(bomb)>>10, expands>>20)

	before := memAfterGC()
	for _, name := range []string{"bomb-a", "bomb-b"} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			BinaryData: map[string][]byte{"crds.yaml.gz": bomb},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createVR(t, ns, "app", cmDoc("declared"), asServiceAccount("deployer"), func(vr *v1alpha1.VidraResource) {
		for _, name := range []string{"bomb-a", "bomb-b"} {
			vr.Spec.ManifestFrom = append(vr.Spec.ManifestFrom, v1alpha1.ManifestSource{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: name}})
		}
	})
	vr := waitVR(t, ns, "app", "refused the bomb", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonManifestTooLarge))
	msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
	if !strings.Contains(msg, "ConfigMap bomb-a") || !strings.Contains(msg, "crds.yaml.gz") {
		t.Errorf("Ready says %q; want the ConfigMap and key named", msg)
	}
	if vr.Status.ManagedCount != 0 {
		t.Errorf("%d objects applied from a manifest that was refused", vr.Status.ManagedCount)
	}
	// Another reconcile, for good measure: the refusal is not a retry
	// that some later attempt gets past.
	at := askReconcile(t, ns, "app")
	waitVR(t, ns, "app", "handled the request "+at, func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.LastHandledReconcileAt == at && hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonManifestTooLarge)(vr)
	})
	after := memAfterGC()
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("heap in use %d MiB before, %d MiB after: %+.1f MiB; %d MiB allocated in all meanwhile",
		before.HeapAlloc>>20, after.HeapAlloc>>20, float64(grew)/(1<<20), allocated>>20)
	if grew > heapBound {
		t.Errorf("the operator's heap grew by %.1f MiB, more than %d MiB", float64(grew)/(1<<20), heapBound>>20)
	}
	if int64(allocated) > expands/4 {
		t.Errorf("%d MiB allocated while refusing a bomb of %d MiB: it was expanded", allocated>>20, expands>>20)
	}
}
