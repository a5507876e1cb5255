package controller

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// defaultTimeout is how long spec.wait waits for health when spec.timeout
// is unset.
const defaultTimeout = 5 * time.Minute

// healthSummary is the Healthy condition of an inventory: True when every
// object is Current, else False with Degraded (some Failed) or Progressing,
// naming the objects that are not Current.
type healthSummary struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	// failed is set when an object failed: no wait can fix that.
	failed bool
}

func summarizeHealth(inventory []v1alpha1.ManagedResource) healthSummary {
	var failed, pending []string
	for _, m := range inventory {
		switch health.Status(m.Health) {
		case health.Current:
		case health.Failed:
			failed = append(failed, describeHealth(m))
		default:
			pending = append(pending, describeHealth(m))
		}
	}
	switch {
	case len(failed) > 0:
		return healthSummary{status: metav1.ConditionFalse, reason: v1alpha1.ReasonDegraded, failed: true,
			message: fmt.Sprintf("%s failed: %s", wording.Count(len(failed), "object"), strings.Join(append(failed, pending...), "; "))}
	case len(pending) > 0:
		return healthSummary{status: metav1.ConditionFalse, reason: v1alpha1.ReasonProgressing,
			message: fmt.Sprintf("%s not healthy yet: %s", wording.Count(len(pending), "object"), strings.Join(pending, "; "))}
	}
	return healthSummary{status: metav1.ConditionTrue, reason: v1alpha1.ReasonAllCurrent,
		message: fmt.Sprintf("%s healthy", wording.Count(len(inventory), "object"))}
}

// describeHealth says "Deployment apps/web is InProgress: Available: 0/1".
func describeHealth(m v1alpha1.ManagedResource) string {
	name := m.Name
	if m.Namespace != "" {
		name = m.Namespace + "/" + name
	}
	h := m.Health
	if h == "" {
		h = string(health.Unknown)
	}
	s := m.Kind + " " + name + " is " + h
	if m.HealthMessage != "" {
		s += ": " + m.HealthMessage
	}
	return s
}

// timeout is how long spec.wait waits for the objects of a new manifest.
func timeout(vr *v1alpha1.VidraResource) time.Duration {
	if vr.Spec.Timeout != nil && vr.Spec.Timeout.Duration > 0 {
		return vr.Spec.Timeout.Duration
	}
	return defaultTimeout
}
