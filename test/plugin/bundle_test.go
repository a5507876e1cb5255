// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// create --configmaps puts the manifest in a gzip ConfigMap the resource
// owns; diff reads it as the operator does (nothing to change once
// applied, a change of the ConfigMap shown as one), and tree lists it
// with the sum applied.
func TestCreateWithConfigMapsThenDiffAndTree(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(file, []byte(docs(configMap("a", "1"), configMap("b", "1"))), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	// A dry run prints the ConfigMap and the resource, and creates neither.
	dry := run(t, "create", "web", "-n", ns, "-f", file, "--configmaps", "--dry-run=client", "-o", "yaml").expect(t, 0).stdout
	if !strings.Contains(dry, "kind: ConfigMap") || !strings.Contains(dry, "manifest.yaml.gz") || !strings.Contains(dry, "kind: VidraResource") {
		t.Errorf("create --configmaps --dry-run=client -o yaml printed\n%s\nwant the ConfigMap and the resource", dry)
	}
	if list, err := kube.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "vidra.infrahub.operators.com/manifest-of=web"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("a client dry run created ConfigMaps: %v, %v", list, err)
	}
	res := run(t, "create", "web", "-n", ns, "-f", file, "--configmaps").expect(t, 0)
	if !strings.Contains(res.stdout, "configmap/web-manifest-0 created") {
		t.Fatalf("create printed %q, want the ConfigMap", res.stdout)
	}
	vr := testenv.WaitVR(t, vidra, ns, "web", "became Ready and healthy", healthy)
	if vr.Spec.Manifest != "" || len(vr.Spec.ManifestFrom) != 1 {
		t.Fatalf("spec.manifest %q, spec.manifestFrom %v: want the manifest in one ConfigMap", vr.Spec.Manifest, vr.Spec.ManifestFrom)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "web-manifest-0", metav1.GetOptions{})
	if err != nil || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != vr.UID {
		t.Fatalf("ConfigMap web-manifest-0: %v, owners %v; want it owned by the resource", err, cm.OwnerReferences)
	}

	if out := run(t, "diff", "web", "-n", ns).expect(t, 0).stdout; !strings.Contains(out, "2 unchanged") {
		t.Errorf("diff of an applied bundle printed %q, want nothing to change", out)
	}
	tree := run(t, "tree", "web", "-n", ns).expect(t, 0).stdout
	sum := strings.TrimPrefix(vr.Status.ManifestFrom[0].SHA256, "sha256:")[:12]
	if !strings.Contains(tree, "ConfigMap/web-manifest-0") || !strings.Contains(tree, "applied sha256:"+sum) {
		t.Errorf("tree printed\n%s\nwant the ConfigMap with sha256:%s", tree, sum)
	}

	// Suspended, the resource leaves a change of its ConfigMap unapplied:
	// diff reads the new content, as the operator will.
	run(t, "suspend", "web", "-n", ns).expect(t, 0)
	cm.BinaryData["manifest.yaml.gz"] = gzipText(t, docs(configMap("a", "2"), configMap("b", "1")))
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := run(t, "diff", "web", "-n", ns).expect(t, 1).stdout
	if !strings.Contains(out, "1 to change, 1 unchanged") {
		t.Errorf("diff after the ConfigMap changed printed\n%s\nwant a's change", out)
	}
	run(t, "resume", "web", "-n", ns).expect(t, 0)
	testenv.WaitVR(t, vidra, ns, "web", "applied the new content", func(cur *v1alpha1.VidraResource) bool {
		return healthy(cur) && len(cur.Status.ManifestFrom) == 1 && cur.Status.ManifestFrom[0].SHA256 != vr.Status.ManifestFrom[0].SHA256
	})
}

func gzipText(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
