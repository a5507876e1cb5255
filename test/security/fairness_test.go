package security_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// TestTenantBacklogDoesNotStarveAnotherNamespace: one tenant creates 50
// resources of 60 objects each, every one of them failing on one object
// (in a namespace its ServiceAccount may not write) so that they keep
// retrying; another
// tenant's resource created right after must not wait behind that backlog.
// Counted, not timed: the reconciles of the noisy tenant that finish
// between the quiet resource's creation and its own first reconcile are at
// most those already running (one per worker), where a shared FIFO makes
// it wait for the whole backlog.
func TestTenantBacklogDoesNotStarveAnotherNamespace(t *testing.T) {
	noisy, quiet := tenantNamespace(t), tenantNamespace(t)
	serviceAccount(t, noisy, "deployer", noisy)
	serviceAccount(t, quiet, "deployer", quiet)

	const resources, objects = 50, 60
	for i := range resources {
		var b strings.Builder
		for j := range objects {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d-%d\ndata:\n  k: v\n", i, j)
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lost-%d\n  namespace: %s-missing\n", i, noisy)
		createVR(t, noisy, fmt.Sprintf("noisy-%d", i), b.String(), asServiceAccount("deployer"))
	}
	created := len(reconciles.snapshot())
	createVR(t, quiet, "quiet", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quiet\ndata:\n  k: v\n", asServiceAccount("deployer"))
	waitVR(t, quiet, "quiet", "became Ready", isReady)

	log := reconciles.snapshot()[created:]
	quietKey := cache.ObjectName{Namespace: quiet, Name: "quiet"}
	noisyBefore, noisyKeys := 0, map[string]bool{}
	for _, k := range log {
		if k == quietKey {
			break
		}
		if k.Namespace == noisy {
			noisyBefore++
			noisyKeys[k.Name] = true
		}
	}
	t.Logf("%d reconciles of the noisy tenant finished between the quiet resource's creation and its first reconcile", noisyBefore)
	if noisyBefore > operatorWorkers+2 {
		t.Errorf("the quiet tenant's resource waited for %d reconciles of the noisy tenant's backlog; at most the %d running should finish first", noisyBefore, operatorWorkers)
	}
	// The noisy tenant's resources keep failing, and are reported so.
	waitVR(t, noisy, "noisy-0", "reported its missing namespace", hasCondition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonForbidden))
}
