package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestPreviousDestination(t *testing.T) {
	secret := &v1alpha1.SecretKeyReference{Name: "kc", Key: "kubeconfig"}
	inventory := []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "a"}}
	for _, tc := range []struct {
		name      string
		dest      v1alpha1.Destination
		recorded  *v1alpha1.ClusterReference
		inventory []v1alpha1.ManagedResource
		moved     bool
	}{
		{"no cluster recorded: the current one", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, nil, inventory, false},
		{"local, both ways of saying it", v1alpha1.Destination{Server: "https://kubernetes.default.svc"}, &v1alpha1.ClusterReference{}, inventory, false},
		{"same remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, false},
		{"local to remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{}, inventory, true},
		{"another Secret", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "other"}}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, true},
		{"moved with nothing to clean up", v1alpha1.Destination{Server: "https://remote:6443"}, &v1alpha1.ClusterReference{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := &v1alpha1.VidraResource{Spec: v1alpha1.VidraResourceSpec{Destination: tc.dest},
				Status: v1alpha1.VidraResourceStatus{InventoryCluster: tc.recorded, ManagedResources: tc.inventory}}
			old, moved := previousDestination(vr)
			if moved != tc.moved {
				t.Fatalf("moved = %v, want %v", moved, tc.moved)
			}
			if moved && !equality.Semantic.DeepEqual(destinationRef(old), tc.recorded) {
				t.Fatalf("previous destination %+v, want %+v", old.Spec.Destination, tc.recorded)
			}
			if !equality.Semantic.DeepEqual(vr.Spec.Destination, tc.dest) {
				t.Fatalf("the resource was changed: %+v", vr.Spec.Destination)
			}
		})
	}
}
