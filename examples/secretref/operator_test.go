// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package secretref_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/go-logr/logr"

	"github.com/vidra-operator/vidra/examples/secretref"
	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
)

var env *controlplane.Env

// The control plane's binaries come from $VIDRA_CONTROLPLANE_DIR, which
// make test sets; go test -short starts none and skips.
func TestMain(m *testing.M) { controlplane.RunMainShort(m, &env, controlplane.Options{}) }

func TestConfigMapIsReconciledWhenANamedSecretChanges(t *testing.T) {
	cfg := controlplane.Need(t, env)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := controlplane.Namespace(t, cs, "secretref-")
	op, err := secretref.New(cs, metadata.NewForConfigOrDie(cfg), ns, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	db := createSecret(t, cs, ns, "db", "v1")
	createSecret(t, cs, ns, "unrelated", "v1")
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "app", Annotations: map[string]string{secretref.SecretsAnnotation: "db, tls"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, cs, ns, "db="+db.ResourceVersion+",tls=absent")

	// A change of a named Secret's data reconciles the ConfigMap.
	db.Data = map[string][]byte{"password": []byte("v2")}
	db, err = cs.CoreV1().Secrets(ns).Update(ctx, db, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitSeen(t, cs, ns, "db="+db.ResourceVersion+",tls=absent")

	// So does the creation of a named Secret that did not exist yet.
	tls := createSecret(t, cs, ns, "tls", "v1")
	waitSeen(t, cs, ns, "db="+db.ResourceVersion+",tls="+tls.ResourceVersion)

	// And its deletion.
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, cs, ns, "db=absent,tls="+tls.ResourceVersion)
}

func createSecret(t *testing.T, cs kubernetes.Interface, ns, name, value string) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string][]byte{"password": []byte(value)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSeen polls the ConfigMap until the operator has recorded want.
func waitSeen(t *testing.T, cs kubernetes.Interface, ns, want string) {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = cm.Annotations[secretref.SeenAnnotation]
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("%s: %q, want %q: %v", secretref.SeenAnnotation, got, want, err)
	}
}
