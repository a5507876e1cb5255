// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// dependsOnIndex indexes VidraResources by the keys of the resources they
// depend on, so that a resource becoming Ready wakes exactly its
// dependents, at once and without a timer.
const dependsOnIndex = "dependsOn"

func indexDependencies(obj any) ([]string, error) {
	vr, ok := obj.(*v1alpha1.VidraResource)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(vr.Spec.DependsOn))
	for _, d := range vr.Spec.DependsOn {
		keys = append(keys, dependencyKey(vr, d).String())
	}
	return keys, nil
}

func dependencyKey(vr *v1alpha1.VidraResource, d v1alpha1.DependencyReference) cache.ObjectName {
	return cache.ObjectName{Namespace: vr.DependencyNamespace(d), Name: d.Name}
}

// wakeDependents enqueues the resources that depend on vr.
func (c *Controller) wakeDependents(vr *v1alpha1.VidraResource) {
	objs, err := c.indexer.ByIndex(dependsOnIndex, cache.MetaObjectToName(vr).String())
	if err != nil {
		return
	}
	for _, obj := range objs {
		d, ok := obj.(*v1alpha1.VidraResource)
		// A dependent in another namespace is refused whatever vr does,
		// unless such dependencies are allowed.
		if !ok || d.Namespace != vr.Namespace && !c.opts.AllowCrossNamespaceDependencies {
			continue
		}
		c.enqueue(cache.MetaObjectToName(d), TriggerDependency)
	}
}

// blocked is why a resource may not apply anything yet: its dependencies.
type blocked struct {
	reason  string
	message string
	// stalled is set when only a change of the resource (or of the
	// operator's flags) can unblock it.
	stalled bool
}

// checkDependencies decides whether vr may apply: every resource of
// spec.dependsOn exists and is Ready, none is refused, and they do not lead
// back to vr. It reads the informer cache only.
func (c *Controller) checkDependencies(vr *v1alpha1.VidraResource) *blocked {
	if len(vr.Spec.DependsOn) == 0 {
		return nil
	}
	for _, d := range vr.Spec.DependsOn {
		if key := dependencyKey(vr, d); key.Namespace != vr.Namespace && !c.opts.AllowCrossNamespaceDependencies {
			return &blocked{reason: v1alpha1.ReasonDependencyRefused, stalled: true, message: fmt.Sprintf(
				"spec.dependsOn names VidraResource %s in another namespace, which this operator does not allow "+
					"(--allow-cross-namespace-dependencies); depend on resources of namespace %s only", key, vr.Namespace)}
		}
	}
	if cycle := c.dependencyCycle(vr); cycle != nil {
		return &blocked{reason: v1alpha1.ReasonDependencyCycle, stalled: true,
			message: "spec.dependsOn forms a cycle, so none of its members can ever apply: " + strings.Join(cycle, " -> ") + "; remove one of the dependencies"}
	}
	var waiting []string
	for _, d := range vr.Spec.DependsOn {
		key := dependencyKey(vr, d)
		dep, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
		switch {
		case err != nil:
			waiting = append(waiting, fmt.Sprintf("VidraResource %s does not exist", key))
		case !dep.IsReady():
			waiting = append(waiting, fmt.Sprintf("VidraResource %s is not Ready (%s)", key, dep.Readiness()))
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	return &blocked{reason: v1alpha1.ReasonDependencyNotReady,
		message: "Nothing applied until the dependencies are Ready: " + wording.List(waiting)}
}

// maxCycleWalk bounds the dependencies one look for a cycle reads, every
// entry of spec.dependsOn on its way counted. The walk runs at every
// reconcile of a resource with dependsOn, and a change of a dependency's
// readiness wakes every dependent; it used to read the whole graph it
// reached: for a namespace of 1,000 resources each depending on the next
// 64, 64,000 dependencies, 8 ms a look on a busy two-core machine. Real
// graphs are a few dozen resources: 1,000 dependencies is a chain of a
// thousand, or a hundred resources of ten dependencies each, read in about
// 1 ms on the same machine, whatever the graph. Past it the walk stops
// and finds no cycle, so the resource waits for its dependencies as any
// other does: a longer cycle still applies nothing, and is reported as its
// members not being Ready (DependencyNotReady) rather than as a cycle.
const maxCycleWalk = 1000

// dependencyCycle returns the cycle through vr that spec.dependsOn forms,
// as keys from vr back to vr, or nil. Only cycles through vr matter here:
// every member of a cycle finds it from itself. Without
// --allow-cross-namespace-dependencies the walk stays in vr's namespace:
// a dependency on another namespace is refused where it is declared, and
// following it would tell vr's tenant of another tenant's resources. It
// reads at most maxCycleWalk dependencies.
func (c *Controller) dependencyCycle(vr *v1alpha1.VidraResource) []string {
	start := cache.MetaObjectToName(vr)
	visited := map[cache.ObjectName]bool{}
	read := 0
	var path []cache.ObjectName
	var walk func(r *v1alpha1.VidraResource) bool
	walk = func(r *v1alpha1.VidraResource) bool {
		path = append(path, cache.MetaObjectToName(r))
		for _, d := range r.Spec.DependsOn {
			if read++; read > maxCycleWalk {
				return false
			}
			next := dependencyKey(r, d)
			if next.Namespace != start.Namespace && !c.opts.AllowCrossNamespaceDependencies {
				continue
			}
			if next == start {
				path = append(path, start)
				return true
			}
			if visited[next] {
				continue
			}
			visited[next] = true
			dep, err := c.lister.VidraResources(next.Namespace).Get(next.Name)
			if err == nil && walk(dep) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if !walk(vr) {
		return nil
	}
	cycle := make([]string, len(path))
	for i, key := range path {
		cycle[i] = key.String()
	}
	return cycle
}
