// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Summary is the Healthy condition of an inventory: True when every
// object is Current, else False with Degraded (some Failed) or Progressing,
// naming the objects that are not Current.
type Summary struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
	// Failed is set when an object failed: no wait can fix that.
	Failed bool
}

// Summarize sums up the health the inventory records of each object.
func Summarize(inventory []v1alpha1.ManagedResource) Summary {
	var failed, pending []string
	for _, m := range inventory {
		switch Status(m.Health) {
		case Current:
		case Failed:
			failed = append(failed, describe(m))
		default:
			pending = append(pending, describe(m))
		}
	}
	switch {
	case len(failed) > 0:
		return Summary{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDegraded, Failed: true,
			Message: fmt.Sprintf("%s failed: %s", wording.Count(len(failed), "object"), wording.List(append(failed, pending...)))}
	case len(pending) > 0:
		return Summary{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProgressing,
			Message: fmt.Sprintf("%s not healthy yet: %s", wording.Count(len(pending), "object"), wording.List(pending))}
	}
	return Summary{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllCurrent,
		Message: fmt.Sprintf("%s healthy", wording.Count(len(inventory), "object"))}
}

// describe says "Deployment apps/web is InProgress: Available: 0/1".
func describe(m v1alpha1.ManagedResource) string {
	name := m.Name
	if m.Namespace != "" {
		name = m.Namespace + "/" + name
	}
	h := m.Health
	if h == "" {
		h = string(Unknown)
	}
	s := m.Kind + " " + name + " is " + h
	if m.HealthMessage != "" {
		s += ": " + m.HealthMessage
	}
	return s
}
