package controller

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestAppliedByVidraCountsOnlyItsApplies(t *testing.T) {
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"Vidra's apply", []metav1.ManagedFieldsEntry{{Manager: "vidra", Operation: apply}}, true},
		{"an update under Vidra's name", []metav1.ManagedFieldsEntry{{Manager: "vidra", Operation: update}}, false},
		{"released: Vidra's other writers only", []metav1.ManagedFieldsEntry{{Manager: v1alpha1.ReleaseFieldManager, Operation: update}, {Manager: v1alpha1.HandoverFieldManager, Operation: update}}, false},
		{"someone else's apply", []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: apply}}, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := appliedByVidra(tc.entries); got != tc.want {
				t.Fatalf("appliedByVidra = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHoldsOthers(t *testing.T) {
	for _, tc := range []struct {
		key  objectKey
		want bool
	}{
		{objectKey{kind: "Namespace", name: "a"}, true},
		{objectKey{group: "apiextensions.k8s.io", kind: "CustomResourceDefinition", name: "a"}, true},
		{objectKey{kind: "ConfigMap", namespace: "a", name: "a"}, false},
		{objectKey{group: "example.com", kind: "Namespace", name: "a"}, false},
	} {
		if got := holdsOthers(tc.key); got != tc.want {
			t.Errorf("holdsOthers(%s) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestIsReplacedTellsAGoneUIDFromAnImmutableField(t *testing.T) {
	gk := schema.GroupKind{Kind: "ConfigMap"}
	uidChanged := apierrors.NewInvalid(gk, "a", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")})
	dataImmutable := apierrors.NewInvalid(gk, "a", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "field is immutable")})
	gone := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("uid mismatch"))
	for _, tc := range []struct {
		name                string
		err                 error
		replaced, immutable bool
	}{
		{"replaced by another object", uidChanged, true, false},
		{"deleted", gone, true, false},
		{"an immutable field of the manifest", dataImmutable, false, true},
		{"anything else", errors.New("boom"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isReplaced(tc.err); got != tc.replaced {
				t.Errorf("isReplaced = %v, want %v", got, tc.replaced)
			}
			if got := isImmutable(tc.err); got != tc.immutable {
				t.Errorf("isImmutable = %v, want %v", got, tc.immutable)
			}
		})
	}
}

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
