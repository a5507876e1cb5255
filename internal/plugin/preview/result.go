// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

// Action is what applying the resource would do to one object.
type Action string

const (
	// ActionCreate: the object does not exist and would be created.
	ActionCreate Action = "create"
	// ActionChange: the object exists and the apply would change it.
	ActionChange Action = "change"
	// ActionUnchanged: the apply would change nothing.
	ActionUnchanged Action = "unchanged"
	// ActionPrune: the object left the manifest and would be deleted.
	ActionPrune Action = "prune"
	// ActionRelease: the object left the manifest and would be kept, with
	// Vidra's marks stripped (spec.prune false, or its prune annotation).
	ActionRelease Action = "release"
	// ActionKeep: the object left the manifest, but prune refuses to delete
	// it (a Namespace or CRD without spec.pruneNamespacesAndCRDs).
	ActionKeep Action = "keep"
	// ActionHeld: the object left the manifest and would be pruned or
	// released, but an object of the manifest of the same kind and name
	// fails (a conflict, a refusal): it may be this one moved, so the
	// operator holds this prune back until that object applies.
	ActionHeld Action = "held"
	// ActionHandOver: the object left the manifest, and another
	// VidraResource that declares it would take it over.
	ActionHandOver Action = "handover"
	// ActionConflict: the object exists and is not this resource's, or
	// the operator refuses the change (a recreation force does not
	// allow): it would not write it.
	ActionConflict Action = "conflict"
	// ActionIgnore: the manifest's object is one Vidra does not apply
	// (annotation vidra.infrahub.operators.com/apply: Ignore).
	ActionIgnore Action = "ignore"
	// ActionError: the API server refused the dry run; Message says why.
	ActionError Action = "error"
)

// Object is the preview of one object.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Action     Action `json:"action"`
	// Diff is the unified diff of the object's YAML, live against what
	// the apply would leave ("" when unchanged).
	Diff string `json:"diff,omitempty"`
	// Message explains a conflict, an error, or a choice of prune.
	Message string `json:"message,omitempty"`
}

// Ref names the object as kubectl does in messages: Kind ns/name.
func (o Object) Ref() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Result is the preview of a whole resource.
type Result struct {
	// Resource is namespace/name of the VidraResource.
	Resource string `json:"resource"`
	// Objects are in manifest order, then the objects leaving the
	// inventory in inventory order.
	Objects []Object `json:"objects"`
}

// Differs tells whether applying would change anything on the
// destination, or could not (a conflict): kubectl diff's exit code 1.
func (r *Result) Differs() bool {
	for _, o := range r.Objects {
		switch o.Action {
		case ActionCreate, ActionChange, ActionPrune, ActionRelease, ActionHandOver, ActionConflict:
			return true
		}
	}
	return false
}

// Failed tells whether the API server refused a dry run.
func (r *Result) Failed() bool {
	for _, o := range r.Objects {
		if o.Action == ActionError {
			return true
		}
	}
	return false
}

// Count returns how many objects have action a.
func (r *Result) Count(a Action) int {
	n := 0
	for _, o := range r.Objects {
		if o.Action == a {
			n++
		}
	}
	return n
}
