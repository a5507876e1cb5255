// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// kubeconfigHeader is a valid kubeconfig of one context, to which the tests
// append what a hostile Secret would.
const kubeconfigHeader = "apiVersion: v1\nkind: Config\ncurrent-context: x\n" +
	"contexts: [{name: x, context: {cluster: c, user: u}}]\n" +
	"clusters: [{name: c, cluster: {server: \"https://10.0.0.1\"}}]\n" +
	"users: [{name: u, user: {token: t}}]\n"

// kubeconfigAliasBomb is the alias bomb of the manifest tests as a
// kubeconfig: pad padding nodes (20,000 make it 44 KB) defeat yaml.v2's
// ratio of aliases to nodes, and a 4 KiB string fanned out tenfold over five
// levels expands to 400 MB.
func kubeconfigAliasBomb(pad int) []byte {
	var b strings.Builder
	b.WriteString(kubeconfigHeader)
	b.WriteString("pad: [" + strings.Repeat("0,", pad) + "0]\n")
	b.WriteString("l0: &l0 \"" + strings.Repeat("x", 4096) + "\"\n")
	for l := 1; l <= 5; l++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l-1), 10), ","))
	}
	return []byte(b.String())
}

// kubeconfigDense is a kubeconfig padded to size bytes with "[]," items,
// the text of the most nodes per byte.
func kubeconfigDense(size int) []byte {
	var b strings.Builder
	b.WriteString(kubeconfigHeader + "junk: [")
	for b.Len() < size-6 {
		b.WriteString("[],")
	}
	b.WriteString("0]\n")
	return []byte(b.String())
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A kubeconfig comes from a Secret a tenant writes: whatever it holds, its
// parse must cost a bounded amount. The alias bomb took 1.7 GB and 27 s,
// a dense 1 MiB Secret 230 MiB, before the bounds.
func TestKubeconfigFromATenantIsParsedWithinBounds(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		// 20,000 padding nodes are over the node cap already; 5,000 are not,
		// and the alias budget stops the expansion.
		{"alias bomb", kubeconfigAliasBomb(20000), fmt.Sprintf("more than %d nodes", maxKubeconfigNodes)},
		{"alias bomb, padded under the node cap", kubeconfigAliasBomb(5000), "aliases expand to too much data"},
		{"dense, under the size cap", kubeconfigDense(maxKubeconfigBytes), fmt.Sprintf("more than %d nodes", maxKubeconfigNodes)},
		{"dense, as large as a Secret", kubeconfigDense(1 << 20), fmt.Sprintf("over the limit of %d bytes", maxKubeconfigBytes)},
		{"merge key bomb", []byte(kubeconfigHeader + "m0: &m0 {k: \"" + strings.Repeat("x", 4096) + "\"}\n" +
			"m1: &m1 {<<: [*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0], n: 1}\nm2: {<<: [*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1], n: 1}\n"),
			"aliases expand to too much data"},
		{"deep nesting", []byte(kubeconfigHeader + "deep: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"), "nest deeper"},
		{"second document", []byte(kubeconfigHeader + "---\n" + kubeconfigHeader), "a second YAML document"},
		{"duplicate key", []byte(kubeconfigHeader + "kind: Config\n"), "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			alloc := allocated(func() { _, _, _, err = restConfigFromKubeconfig(tc.data, "") })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one saying %q", err, tc.want)
			}
			// About 250 bytes per node of the YAML parser's tree, at most
			// maxKubeconfigNodes of them, and a few copies of the text.
			if budget := uint64(16 << 20); alloc > budget {
				t.Errorf("parsing a %d-byte kubeconfig allocated %d MiB, over %d MiB", len(tc.data), alloc>>20, budget>>20)
			}
			t.Logf("%d bytes: %d KiB allocated; %v", len(tc.data), alloc>>10, err)
		})
	}
}

// What the bounds let through stays cheap, and real kubeconfigs are far
// below them.
func TestKubeconfigJustUnderTheBoundsIsAccepted(t *testing.T) {
	// Dense, just under the node cap.
	var b strings.Builder
	b.WriteString(kubeconfigHeader + "junk: [")
	for range (maxKubeconfigNodes - 200) / 3 {
		b.WriteString("0,")
	}
	b.WriteString("0]\n")
	dense := []byte(b.String())
	var err error
	alloc := allocated(func() { _, _, _, err = restConfigFromKubeconfig(dense, "") })
	if err != nil {
		t.Fatalf("kubeconfig under the node cap refused: %v", err)
	}
	if budget := uint64(16 << 20); alloc > budget {
		t.Errorf("parsing a kubeconfig under the node cap allocated %d MiB, over %d MiB", alloc>>20, budget>>20)
	}

	// Twenty clusters, each with its CA, client certificate and key embedded,
	// as a merged kubeconfig holds them: well under both caps.
	cert := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("c", 1200)))
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 1700)))
	b.Reset()
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: ctx-7\npreferences: {}\nclusters:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "- name: c-%d\n  cluster:\n    server: https://api-%d.example:6443\n    certificate-authority-data: %s\n", i, i, cert)
	}
	b.WriteString("users:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "- name: u-%d\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n", i, cert, key)
	}
	b.WriteString("contexts:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "- name: ctx-%d\n  context:\n    cluster: c-%d\n    user: u-%d\n    namespace: default\n", i, i, i)
	}
	merged := []byte(b.String())
	if len(merged) > maxKubeconfigBytes/2 {
		t.Fatalf("the merged kubeconfig is %d bytes, over half the cap", len(merged))
	}
	cfg, server, exact, err := restConfigFromKubeconfig(merged, "https://api-12.example:6443")
	if err != nil {
		t.Fatal(err)
	}
	if server != "https://api-12.example:6443" || !exact || string(cfg.CertData) != strings.Repeat("c", 1200) || string(cfg.KeyData) != strings.Repeat("k", 1700) {
		t.Errorf("server %q, exact %v, cert %d bytes, key %d bytes", server, exact, len(cfg.CertData), len(cfg.KeyData))
	}
}

// The bounded front end reads what clientcmd.Load read: YAML as kubectl
// writes it, JSON, and YAML that reuses a user through an alias.
func TestKubeconfigFormsStillParse(t *testing.T) {
	tests := map[string]string{
		"written by clientcmd": string(kubeconfig(t, "a", map[string]string{"a": "https://a.example"}, nil)),
		"JSON": `{"apiVersion":"v1","kind":"Config","current-context":"a",
	"contexts":[{"name":"a","context":{"cluster":"a","user":"u"}}],
	"clusters":[{"name":"a","cluster":{"server":"https://a.example","insecure-skip-tls-verify":true}}],
	"users":[{"name":"u","user":{"token":"t"}}]}`,
		"aliases": "apiVersion: v1\nkind: Config\ncurrent-context: a\n" +
			"contexts: [{name: a, context: &ctx {cluster: a, user: u}}, {name: b, context: *ctx}]\n" +
			"clusters: [{name: a, cluster: {server: \"https://a.example\"}}]\n" +
			"users: [{name: u, user: {token: t}}]\n",
		"leading document marker and comments": "# written by hand\n---\n" + kubeconfigHeader[:len(kubeconfigHeader)-1] + " # the token\n",
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, _, _, err := restConfigFromKubeconfig([]byte(data), "")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BearerToken == "" && cfg.Host == "" {
				t.Errorf("empty configuration: %+v", cfg)
			}
		})
	}
	if _, _, _, err := restConfigFromKubeconfig(nil, ""); err == nil || !strings.Contains(err.Error(), "no contexts") {
		t.Errorf("empty kubeconfig: err = %v; want no contexts", err)
	}
}
