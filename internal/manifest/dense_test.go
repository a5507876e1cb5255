// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// realisticObjects returns n objects of the size people write, in turn a
// Deployment, a Service and a ConfigMap, as one manifest of about 1 MiB for
// n = 1000.
func realisticObjects(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("---\n")
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[1]d
  namespace: shop
  labels:
    app.kubernetes.io/name: web-%[1]d
    app.kubernetes.io/part-of: shop
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: web-%[1]d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web-%[1]d
        app.kubernetes.io/part-of: shop
    spec:
      serviceAccountName: web
      containers:
        - name: app
          image: registry.example.com/shop/web:1.27.3
          args: ["--listen=:8080", "--log-level=info"]
          ports:
            - name: http
              containerPort: 8080
          env:
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef: {name: db, key: url}
            - name: CACHE_TTL
              value: "300"
          readinessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 5
          resources:
            requests: {cpu: 100m, memory: 128Mi}
            limits: {memory: 256Mi}
`, i)
		case 1:
			fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata:
  name: web-%[1]d
  namespace: shop
  labels:
    app.kubernetes.io/name: web-%[1]d
spec:
  selector:
    app.kubernetes.io/name: web-%[1]d
  ports:
    - name: http
      port: 80
      targetPort: http
`, i)
		default:
			fmt.Fprintf(&b, `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-%[1]d
  namespace: shop
data:
  LOG_FORMAT: json
  FEATURE_FLAGS: "checkout,search,recommendations"
  nginx.conf: |
    server {
      listen 8080;
      location / { proxy_pass http://127.0.0.1:9000; }
    }
`, i)
		}
	}
	return b.String()
}

// bigCRD returns a CustomResourceDefinition whose schema is about size
// bytes, written as controller-gen writes them: nested properties, each
// with a description of a few sentences of prose.
func bigCRD(size int) string {
	var b strings.Builder
	b.WriteString(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    kind: Widget
    plural: widgets
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `            field%[1]d:
              description: |-
                Field%[1]d configures one aspect of the widget, such as its size, its
                color or its placement. When unset, the controller picks a default
                that fits most clusters; see the documentation for details.
              type: object
              properties:
                name:
                  description: Name of the referent, in the same namespace.
                  type: string
                  maxLength: 253
                replicas:
                  description: Replicas is the desired number of copies, at least 1.
                  type: integer
                  format: int32
                  minimum: 1
                mode:
                  type: string
                  enum: [Auto, Manual, Disabled]
              required: ["name"]
`, i)
	}
	return b.String()
}

// denseManifests are valid manifests of the smallest nodes, the worst case
// of memory per byte, each of about size bytes.
func denseManifests(size int) []hostileManifest {
	items := size / 2
	return []hostileManifest{
		{"dense flow sequence", configMapHeader + "data: [" + strings.Repeat("0,", items) + "0]\n", ReasonManifestTooLarge, "split"},
		{"dense flow mapping", configMapHeader + "data: {" + denseKeys(size, ": 0, ") + "_: 0}\n", ReasonManifestTooLarge, "split"},
		{"dense flow mapping of keys", configMapHeader + "data: {" + denseKeys(size, ", ") + "_}\n", ReasonManifestTooLarge, "split"},
		{"dense block sequence", configMapHeader + "data:\n" + strings.Repeat("- 0\n", size/4), ReasonManifestTooLarge, "split"},
		{"dense block sequence of nulls", configMapHeader + "data:\n" + strings.Repeat("-\n", size/2), ReasonManifestTooLarge, "split"},
		{"dense block mapping", configMapHeader + "data:\n  " + denseKeys(size, ": 0\n  ") + "_: 0\n", ReasonManifestTooLarge, "split"},
		{"dense JSON array", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[` + strings.Repeat("0,", items) + "0]}", ReasonManifestTooLarge, "split"},
		{"dense JSON object", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{` + denseKeys(size, `":0,"`) + `_":0}}`, ReasonManifestTooLarge, "split"},
		{"dense invalid JSON read as YAML", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[` + strings.Repeat("0,", items) + "0]", ReasonInvalidManifest, "invalid JSON"},
		{"many dense documents", strings.Repeat("---\n"+configMapHeader+"data: ["+strings.Repeat("0,", 1400)+"0]\n", size/2860), ReasonManifestTooLarge, "split"},
	}
}

// denseKeys returns distinct short keys, each followed by sep, about size
// bytes in all; the text starts with a quote when sep ends with one, so
// that it can be a list of JSON keys.
func denseKeys(size int, sep string) string {
	var b strings.Builder
	if strings.HasSuffix(sep, `"`) {
		b.WriteString(`"`)
	}
	for i := 0; b.Len() < size; i++ {
		b.WriteString(strconv.FormatInt(int64(i), 36) + sep)
	}
	return b.String()
}

// TestParseDenseManifestsAreRefusedCheaply checks that a dense manifest is
// refused where its nodes run over MaxNodes, on the document and line where
// they do, with a message that says the limit and what to do.
func TestParseDenseManifestsAreRefusedCheaply(t *testing.T) {
	rows := strings.Repeat("- 0\n", MaxNodes)
	tests := []struct {
		name, manifest string
		index, line    int
	}{
		// The weight before the rows is 2 for the document and 2 for each of
		// the five keys; each row weighs 1, so the count runs over on row
		// MaxNodes-11, on line 5+MaxNodes-11.
		{"block sequence", configMapHeader + "data:\n" + rows, 0, MaxNodes - 6},
		// The first document weighs 13 (its "---" 3, as its last dash also
		// reads as a sequence entry), the second 15 before its rows, which
		// start on line 12: over on row MaxNodes-27, line 11+MaxNodes-27.
		{"second document", configMaps(1) + "---\n" + configMapHeader + "data:\n" + rows, 1, MaxNodes - 16},
		// 20 before the rows ("{" and "[" 3 each, the commas 3 each, 2 for
		// the document), 3 per row: over on row (MaxNodes-20)/3+1.
		{"JSON", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[` + strings.Repeat("0,\n", MaxNodes/3) + "0]}", 0, (MaxNodes-20)/3 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs, alloc := parseAllocating(tt.manifest)
			if alloc > 16<<20 {
				t.Errorf("Parse() allocated %d MiB refusing the manifest, want under 16 MiB", alloc>>20)
			}
			if len(errs) != 1 {
				t.Fatalf("Parse() = %d objects, errors %v; want one error", len(objs), errs)
			}
			e := errs[0]
			if e.Reason != ReasonManifestTooLarge || e.Index != tt.index || e.Line != tt.line {
				t.Errorf("error = %s at document %d, line %d; want %s at document %d, line %d", e.Reason, e.Index, e.Line, ReasonManifestTooLarge, tt.index, tt.line)
			}
			if !strings.Contains(e.Message, "120000 nodes") || !strings.Contains(e.Message, "split it over several VidraResources") {
				t.Errorf("message %q does not say the limit and what to do", e.Message)
			}
		})
	}
}

// TestParseManifestsUnderTheNodeCapStayWithinBudget parses the densest
// manifests just under MaxNodes, which are accepted, and checks that they
// cost no more than maxParseAlloc: the worst a tenant can make one parse
// cost.
func TestParseManifestsUnderTheNodeCapStayWithinBudget(t *testing.T) {
	const n = MaxNodes - 100
	tests := []struct{ name, manifest string }{
		{"block mapping", configMapHeader + "data:\n  " + blockKeys(n/2)},
		{"block sequence", configMapHeader + "data:\n" + strings.Repeat("- 0\n", n)},
		{"block sequence of nulls", configMapHeader + "data:\n" + strings.Repeat("-\n", n)},
		{"flow mapping of keys", configMapHeader + "data: {" + strings.TrimSuffix(strings.Repeat("a, ", n/3), ", ") + "}\n"},
		{"JSON array", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[` + strings.Repeat("0,", n/3-10) + "0]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, alloc := parseAllocating(tt.manifest)
			for _, e := range errs {
				if e.Reason == ReasonManifestTooLarge {
					t.Fatalf("Parse() refused a manifest under the cap: %v", e)
				}
			}
			t.Logf("%d bytes: %d MiB allocated", len(tt.manifest), alloc>>20)
			if alloc > maxParseAlloc {
				t.Errorf("Parse() allocated %d MiB, over the budget of %d MiB", alloc>>20, maxParseAlloc>>20)
			}
		})
	}
}

// blockKeys returns n distinct keys of a block mapping indented by two.
func blockKeys(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("k" + strconv.Itoa(i) + ": 0\n  ")
	}
	return b.String()
}

// TestParseRealisticManifestsAreFarBelowTheNodeCap checks that the largest
// manifests people write are accepted with room to spare.
func TestParseRealisticManifestsAreFarBelowTheNodeCap(t *testing.T) {
	for _, m := range []struct{ name, text string }{
		{"1000 objects", realisticObjects(1000)},
		{"1 MiB CustomResourceDefinition", bigCRD(1 << 20)},
		{"sample application", mustRead(t, "testdata/app.yaml")},
	} {
		objs, errs := Parse(m.text)
		if len(errs) > 0 || len(objs) == 0 {
			t.Fatalf("%s: Parse() = %d objects, errors %v", m.name, len(objs), errs)
		}
		if w, _ := nodeWeight(m.text, MaxNodes); w > MaxNodes*2/3 {
			t.Errorf("%s weighs %d, over two thirds of MaxNodes (%d)", m.name, w, MaxNodes)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzNodeWeight checks the promise the node cap rests on: whatever the
// text, the YAML parser builds no more nodes than nodeWeight counts, so that
// no way of writing a manifest (quotes, comments, block scalars, odd line
// breaks) hides nodes from the count.
func FuzzNodeWeight(f *testing.F) {
	for _, s := range []string{
		"a: [0, 0, {b: c}, [d: e, f], {g, h}, ? i]\n",
		"? a\n: b\n?\n:\n- \n-\n- - - x\n",
		"a: \"x 'y\", b: [0,0,0], c: 'z\"'\n",
		"a: b\n  \"c\nk: [0,0,0,0]\nx: d\"\n",
		"- key: |\n  k2: [0,0,0,0]\n",
		"a: |\n    deep\n  k: [0,0]\n",
		"a: [0,#x\n 0, 0]\n# - 0\n",
		"a:\u2028- 0\u2028- 0\u0085b:\u2029c\n",
		"a: 1\n...\n---\nb: [*x]\n...\n[0]\n",
		"{\"a\":[1,2,{\"b\":null}],\"c\":{}}",
		"[[[[]]], {a: {b: {c: [1]}}}]",
		realisticObjects(3),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64<<10 {
			return
		}
		weight, _ := nodeWeight(s, math.MaxInt)
		if nodes := yamlNodes(s); nodes > weight {
			t.Fatalf("the YAML parser built %d nodes, nodeWeight counted %d", nodes, weight)
		}
	})
}

// yamlNodes returns how many nodes go.yaml.in/yaml/v3 builds for the
// documents of s it parses, up to the first error.
func yamlNodes(s string) (nodes int) {
	defer func() { _ = recover() }()
	dec := yaml.NewDecoder(strings.NewReader(s))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return nodes
		}
		nodes += countNodes(&doc)
	}
}

// countNodes counts n and the nodes under it; an alias counts once, as the
// node it is, not the nodes it refers to.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, child := range n.Content {
		c += countNodes(child)
	}
	return c
}
