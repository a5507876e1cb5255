// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestHelmLintPasses(t *testing.T) {
	for _, values := range []string{"", filepath.Join(chartDir, "ci/hardened-values.yaml")} {
		args := []string{"lint", chartDir, "--strict", "--kube-version", kubeVersion}
		if values != "" {
			args = append(args, "--values", values)
		}
		helm(t, args...)
	}
}

// The two install routes cannot drift apart: with the default values the
// chart renders, object for object, what kubectl kustomize renders of
// manifests/ (the Namespace aside, which helm install --create-namespace
// makes), and with rbac.restricted and sharding what it renders of
// deploy/restricted and deploy/sharded. Only Helm's own labels differ.
func TestChartRendersTheKustomizeInstalls(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		args []string
	}{
		{"manifests", nil},
		{"deploy/restricted", []string{"--set", "rbac.restricted=true"}},
		{"deploy/sharded", []string{"--set", "sharding.enabled=true,leaderElection.enabled=false,replicas=3"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			want := byKey(t, kustomize(t, tc.dir))
			got := byKey(t, template(t, tc.args...))
			for key, k := range want {
				if k.GetKind() == "Namespace" {
					continue
				}
				c, ok := got[key]
				if !ok {
					t.Errorf("%s of %s: the chart does not render it", key, tc.dir)
					continue
				}
				if diff := compareObjects(k, c); diff != "" {
					t.Errorf("%s: the chart differs from %s: %s", key, tc.dir, diff)
				}
			}
			for key := range got {
				if _, ok := want[key]; !ok {
					t.Errorf("%s: the chart renders it by default, %s does not", key, tc.dir)
				}
			}
		})
	}
}

// The chart's CRDs are the generated ones (hack/update-codegen.sh copies
// them), byte for byte.
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "manifests/crd/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD in manifests/crd (%v)", err)
	}
	charted, _ := filepath.Glob(filepath.Join(chartDir, "crds/*.yaml"))
	if len(charted) != len(files) {
		t.Errorf("charts/vidra/crds holds %d files, manifests/crd %d: run make generate", len(charted), len(files))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("charts/vidra/crds/%s is not manifests/crd/%s (err %v): run make generate", filepath.Base(f), filepath.Base(f), err)
		}
	}
}

// The hardened values: the restricted RBAC, an image by digest, a
// certificate for /metrics, the monitoring objects and the webhook
// receiver behind an Ingress, on a priority class and spread over nodes.
func TestHardenedValuesRender(t *testing.T) {
	objs := byKey(t, template(t, "--values", filepath.Join(chartDir, "ci/hardened-values.yaml")))
	deploy := objs["Deployment vidra-system/vidra"]
	if deploy == nil {
		t.Fatalf("no Deployment rendered: %v", keys(objs))
	}
	pod, _, _ := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	container := pod["containers"].([]any)[0].(map[string]any)
	if img := container["image"].(string); !strings.Contains(img, "@sha256:") {
		t.Errorf("image %q is not pinned by digest", img)
	}
	args := strings.Join(toStrings(container["args"]), " ")
	for _, want := range []string{"--leader-elect", "--metrics-secure", "--metrics-cert-dir=", "--webhook-bind-address=:9443", "--webhook-cert-dir="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--trusted-namespaces") {
		t.Errorf("the hardened install trusts more namespaces: %q", args)
	}
	if pod["priorityClassName"] != "system-cluster-critical" || pod["topologySpreadConstraints"] == nil || pod["nodeSelector"] == nil {
		t.Errorf("priority class, spread or node selection missing: %v", pod)
	}
	assertRestrictedPod(t, pod)
	role := objs["ClusterRole /vidra-manager"]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		m := r.(map[string]any)
		if slices.Contains(toStrings(m["resources"]), "*") && slices.ContainsFunc(toStrings(m["verbs"]), func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
			t.Errorf("the restricted role writes every resource: %v", m)
		}
	}
	for _, key := range []string{"ServiceMonitor vidra-system/vidra", "PrometheusRule vidra-system/vidra", "ConfigMap vidra-system/vidra-dashboard",
		"Service vidra-system/vidra-webhooks", "Ingress vidra-system/vidra-webhooks"} {
		if objs[key] == nil {
			t.Errorf("%s not rendered; have %v", key, keys(objs))
		}
	}
}

// assertRestrictedPod checks what the restricted Pod Security profile asks
// of the pod and its container.
func assertRestrictedPod(t *testing.T, pod map[string]any) {
	t.Helper()
	psc, _ := pod["securityContext"].(map[string]any)
	if psc["runAsNonRoot"] != true || psc["seccompProfile"] == nil {
		t.Errorf("pod security context %v is not restricted", psc)
	}
	for _, c := range pod["containers"].([]any) {
		sc, _ := c.(map[string]any)["securityContext"].(map[string]any)
		caps, _ := sc["capabilities"].(map[string]any)
		if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || !reflect.DeepEqual(caps["drop"], []any{"ALL"}) {
			t.Errorf("container security context %v is not restricted", sc)
		}
	}
}

// Bad values fail at helm install, by the schema or the templates, not at
// run time.
func TestBadValuesFailToRender(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"replicas=-1", "minimum"},
		{"replicaCount=2", "additional properties"},
		{"image.digest=sha256:nothex", "image/digest"},
		{"trustedNamespaces[0]=Bad_Name", "trustedNamespaces"},
		{"memoryLimit=lots", "memoryLimit"},
		{"logFormat=xml", "logFormat"},
		{"extraArgs[0]=rm -rf", "extraArgs"},
		{"config.requeueResourcesAfter=soon", "requeueResourcesAfter"},
		{"metrics.port=70000", "metrics/port"},
		{"sharding.enabled=true", "exclude each other"},
		{"webhook.port=0", "webhook/port"},
		{"webhook.ingress.enabled=true", "webhook.ingress.host"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := helmErr(t, "template", "vidra", chartDir, "--namespace", installNamespace, "--kube-version", kubeVersion, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: err = %v, want one that names %q", tc.set, err, tc.want)
			}
		})
	}
}

// chartOnlyLabels are the labels Helm installs carry and kustomize's do
// not; selectors carry the instance too, so that two releases in one
// namespace do not select each other's pods.
var chartOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// compareObjects says how the chart's object c differs from the kustomize
// install's k, Helm's labels aside: "" when they match.
func compareObjects(k, c *unstructured.Unstructured) string {
	k, c = normalize(k), normalize(c)
	for name, v := range k.GetLabels() {
		if c.GetLabels()[name] != v {
			return "label " + name + " is " + c.GetLabels()[name] + ", want " + v
		}
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := u.DeepCopy().Object
		unstructured.RemoveNestedField(m, "metadata", "labels")
		unstructured.RemoveNestedField(m, "metadata", "annotations")
		return m
	}
	km, cm := strip(k), strip(c)
	if !reflect.DeepEqual(km, cm) {
		kj, _ := json.MarshalIndent(km, "", " ")
		cj, _ := json.MarshalIndent(cm, "", " ")
		return "\nkustomize:\n" + string(kj) + "\nchart:\n" + string(cj)
	}
	return ""
}

// normalize drops Helm's own labels from the object and its selectors, and
// takes it through JSON so that numbers compare alike.
func normalize(u *unstructured.Unstructured) *unstructured.Unstructured {
	data, _ := json.Marshal(u.Object)
	out := &unstructured.Unstructured{}
	_ = json.Unmarshal(data, &out.Object)
	for _, path := range [][]string{{"metadata", "labels"}, {"spec", "selector", "matchLabels"}, {"spec", "selector"}, {"spec", "template", "metadata", "labels"}} {
		m, ok, _ := unstructured.NestedStringMap(out.Object, path...)
		if !ok {
			continue
		}
		for _, l := range chartOnlyLabels {
			delete(m, l)
		}
		_ = unstructured.SetNestedStringMap(out.Object, m, path...)
	}
	return out
}

func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
		if _, dup := m[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		m[key] = o
	}
	return m
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
