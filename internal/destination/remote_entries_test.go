// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// secretResolver is a Resolver over fake clients whose namespace team-a
// holds a Secret per entry of kubeconfigs, every namespace trusted.
func secretResolver(t *testing.T, kubeconfigs map[string][]byte) (*Resolver, *kubefake.Clientset) {
	t.Helper()
	var secrets, metas []runtime.Object
	for name, data := range kubeconfigs {
		om := metav1.ObjectMeta{Namespace: "team-a", Name: name, ResourceVersion: "1"}
		secrets = append(secrets, &corev1.Secret{ObjectMeta: om, Data: map[string][]byte{defaultSecretKey: data}})
		metas = append(metas, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: om})
	}
	kube := kubefake.NewClientset(secrets...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		Map:     func(watchregistry.Event) []cache.ObjectName { return nil },
		Enqueue: func(cache.ObjectName, watchregistry.Event) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Kube: kube, Config: &rest.Config{Host: "https://127.0.0.1:1"}, Metadata: metadatafake.NewSimpleMetadataClient(scheme, metas...),
		Discovery: kube.Discovery(), Registry: reg, Namespace: testOperatorNamespace, TrustedNamespaces: []string{AllNamespaces}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); d.remotes.wait() })
	d.Start(ctx)
	return d, kube
}

// entries counts the remote entries cached, and the Secret reads made.
func (d *Resolver) entries() int {
	d.remotes.mu.Lock()
	defer d.remotes.mu.Unlock()
	return len(d.remotes.entries)
}

func wantEntries(t *testing.T, d *Resolver, want int, when string) {
	t.Helper()
	if n := d.entries(); n != want {
		t.Errorf("%s: %d remote entries cached, want %d", when, n, want)
	}
}

func secretReads(kube *kubefake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

func remoteResource(name, secret, server string) *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(name)}}
	vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: secret}
	vr.Spec.Destination.Server = server
	return vr
}

// A tenant who names one server after another that its kubeconfig has no
// context for holds one entry (clients, a registry cluster) at a time, not
// one per name; a retry of the same name reads the Secret no more; the
// entries go with the resources that tried them.
func TestFailedLookupsHoldOneEntryPerResource(t *testing.T) {
	d, kube := secretResolver(t, map[string][]byte{"kc": kubeconfig(t, "a", map[string]string{"a": "https://127.0.0.1:1"}, nil)})
	web := remoteResource("web", "kc", "")
	for i := range 50 {
		web.Spec.Destination.Server = fmt.Sprintf("https://nowhere.example/%d", i)
		if _, err := d.Resolve(t.Context(), web); err == nil || !strings.Contains(err.Error(), "has no context for destination.server") {
			t.Fatalf("server %d: %v", i, err)
		}
		if n := d.entries(); n != 1 {
			t.Fatalf("after server %d: %d entries cached, want the one tried last", i, n)
		}
	}
	reads := secretReads(kube)
	if _, err := d.Resolve(t.Context(), web); err == nil {
		t.Fatal("resolved a server the kubeconfig has no context for")
	}
	if got := secretReads(kube); got != reads {
		t.Errorf("a retry of the same lookup read the Secret %d more times; want none", got-reads)
	}

	// Another resource trying the same name shares the entry, which stays
	// until neither tries it.
	api := remoteResource("api", "kc", web.Spec.Destination.Server)
	if _, err := d.Resolve(t.Context(), api); err == nil {
		t.Fatal("resolved a server the kubeconfig has no context for")
	}
	d.Release(cache.MetaObjectToName(web))
	wantEntries(t, d, 1, "after one of two resources trying it was deleted")
	d.Release(cache.MetaObjectToName(api))
	wantEntries(t, d, 0, "once the resources that tried it are deleted")
}

// A resource that resolved once, then names servers its kubeconfig has no
// context for, holds the entry it tries last, no more: the one it resolved
// goes with the lookup that found it.
func TestAResourceThatResolvedThenFailsHoldsOneEntry(t *testing.T) {
	d, _ := secretResolver(t, map[string][]byte{"kc": kubeconfig(t, "a", map[string]string{"a": "https://127.0.0.1:1"}, nil)})
	web := remoteResource("web", "kc", "https://127.0.0.1:1")
	if _, err := d.Resolve(t.Context(), web); err != nil && !IsUnreachable(err) {
		t.Fatal(err)
	}
	for i := range 10 {
		web.Spec.Destination.Server = fmt.Sprintf("https://nowhere.example/%d", i)
		if _, err := d.Resolve(t.Context(), web); err == nil {
			t.Fatal("resolved a server the kubeconfig has no context for")
		}
	}
	wantEntries(t, d, 1, "after ten servers")
	d.Release(cache.MetaObjectToName(web))
	wantEntries(t, d, 0, "once the resource is deleted")
}

// A redirect from a remote server to plain http is refused before anything
// is sent: neither the manifest nor the kubeconfig's token leaves in clear
// text.
func TestARedirectToPlainHTTPIsRefused(t *testing.T) {
	reached := make(chan string, 10)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Method + " " + r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"d"}}`)
	}))
	t.Cleanup(plain.Close)
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/internal?x=1", http.StatusTemporaryRedirect)
	})
	cc, _ := remoteClientsIn(t, srv, newTestGuard(t, Guard{}), "team-a")
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"d"},"data":{"k":"v"}}`)
	_, err := cc.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("d").
		Patch(t.Context(), "x", types.ApplyPatchType, cm, metav1.PatchOptions{FieldManager: "vidra"})
	if err == nil || !strings.Contains(err.Error(), "which is not https") {
		t.Errorf("apply through a redirect to http: %v, want it refused", err)
	}
	// The client follows a redirect before its request returns: whatever
	// reached the plain server has by now.
	select {
	case got := <-reached:
		t.Errorf("the plain-http server got %s", got)
	default:
	}
}
