// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// statusRefusal is the message of the status writes RefuseStatusesNaming
// refuses.
const statusRefusal = "status write refused by the test"

// RefuseStatusesNaming has the API server refuse, in namespace ns, every
// status write of a VidraResource whose inventory names an object called
// name: the failed status write after an apply, as a 409, a size limit or a
// process killed before it would leave it. It waits until the policy acts,
// probing with dry-run status writes of the resource vrName, which must
// exist. The returned function removes the policy; it waits for nothing.
func RefuseStatusesNaming(ctx context.Context, kube kubernetes.Interface, vidra versioned.Interface, ns, vrName, name string) (func(), error) {
	policyName := "refuse-status-" + ns
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupName}, APIVersions: []string{"*"},
						Resources: []string{v1alpha1.ResourcePlural + "/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.status) || !has(object.status.managedResources) || object.status.managedResources.all(m, m.name != %q)", name),
				Message:    statusRefusal,
			}},
		},
	}
	policies := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	remove := func() {
		_ = bindings.Delete(context.Background(), policyName, metav1.DeleteOptions{})
		_ = policies.Delete(context.Background(), policyName, metav1.DeleteOptions{})
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		remove()
		return nil, err
	}
	// Policies load asynchronously: probe until a dry-run write is refused.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, vrName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}}
		_, err = vidra.InfrahubV1alpha1().VidraResources(ns).UpdateStatus(ctx, vr, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), statusRefusal), nil
	})
	if err != nil {
		remove()
		return nil, fmt.Errorf("the admission policy never refused a status write: %w", err)
	}
	return remove, nil
}
