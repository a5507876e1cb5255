// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// kubeconfigBomb is the alias bomb of issue 13 as a kubeconfig: a valid
// context for server, pad padding nodes (20,000 make it 44 KB and defeat
// yaml.v2's ratio of aliases to nodes), and a 4 KB string fanned out tenfold
// over five levels.
func kubeconfigBomb(server string, pad int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"+
		"clusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\n", server)
	b.WriteString("pad: [" + strings.Repeat("0,", pad) + "0]\n")
	b.WriteString("l0: &l0 \"" + strings.Repeat("x", 4096) + "\"\n")
	for l := 1; l <= 5; l++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l-1), 10), ","))
	}
	return b.String()
}

// TestHostileKubeconfigCannotTakeOperatorDown: a tenant's kubeconfig Secret
// is text the operator parses in its own process. The 44 KB alias bomb once
// took the heap to 2 GiB (the operator is OOM-killed at 256 Mi, and again on
// every restart, since it reads the Secret again) and held a worker for
// three minutes. Now it, a bomb padded under the node cap, and a kubeconfig
// over the size cap are refused before any decoder expands them, each with
// DestinationUnavailable naming the limit, and the operator goes on working.
func TestHostileKubeconfigCannotTakeOperatorDown(t *testing.T) {
	const server = "https://127.0.0.1:1"
	ns := tenantNamespace(t)
	serviceAccount(t, ns, "deployer", ns)
	secrets := map[string]string{
		"bomb":   kubeconfigBomb(server, 20000),
		"padded": kubeconfigBomb(server, 5000),
		// A valid kubeconfig but for a 512 KiB comment: real ones are a few
		// KiB.
		"big": kubeconfigBomb(server, 0)[:300] + "\n# " + strings.Repeat("x", 512<<10) + "\n",
	}
	grant(t, ns, "deployer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"bomb", "padded", "big"}, Verbs: []string{"get"}})
	for name, data := range secrets {
		if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"kubeconfig": []byte(data)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	peak := sampleHeap(t)
	for name := range secrets {
		createVR(t, ns, name, cmDoc("x"), func(vr *v1alpha1.VidraResource) {
			vr.Spec.ServiceAccountName = "deployer"
			vr.Spec.Destination.Server = server
			vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: name, Key: "kubeconfig"}
		})
	}
	want := map[string]string{
		"bomb":   "holds more than 20000 nodes",
		"padded": "aliases expand to too much data",
		"big":    "over the limit of 262144 bytes (256 KiB)",
	}
	for name, fragment := range want {
		msg := readyMessageOf(t, ns, name, v1alpha1.ReasonDestinationError)
		if !strings.Contains(msg, fragment) || !strings.Contains(msg, "Secret "+ns+"/"+name) {
			t.Errorf("%s: Ready message does not name the Secret and say %q: %s", name, fragment, msg)
		}
		if strings.Contains(msg, "127.0.0.1:1") {
			t.Errorf("%s: the operator went on to dial the server of a refused kubeconfig: %s", name, msg)
		}
		t.Logf("%s (%d bytes): %s", name, len(secrets[name]), msg)
	}
	waitEventOn(t, ns, "bomb", "", "holds more than 20000 nodes")

	// The barrier: a resource created after the bombs is reconciled, so the
	// operator is up and its workers are free.
	createVR(t, ns, "after", cmDoc("after"), asServiceAccount("deployer"))
	waitVR(t, ns, "after", "became Ready after the bombs", isReady)

	before, highest, alloc := peak()
	if highest > before+heapBudget {
		t.Errorf("the heap in use grew from %d MiB to %d MiB while the operator handled the kubeconfigs, more than the budget of %d MiB", before>>20, highest>>20, heapBudget>>20)
	}
	t.Logf("heap in use %d MiB before, at most %d MiB during; %d MiB allocated in all", before>>20, highest>>20, alloc>>20)
}
