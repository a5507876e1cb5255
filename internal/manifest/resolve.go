// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ScopeFunc tells whether a kind is namespaced. It returns an error for a kind
// it cannot place: one matching meta.IsNoMatchError when the destination does
// not serve the kind, any other error when it could not find out. Callers
// wrap a discovery-backed RESTMapper.
type ScopeFunc func(gvk schema.GroupVersionKind) (namespaced bool, err error)

// kindSuggester is a ScopeFunc's error for a kind the destination does not
// serve that knows what the manifest most likely meant ("it serves
// Deployment as apiVersion \"apps/v1\""); the error then says that instead
// of asking whether a CustomResourceDefinition is installed.
type kindSuggester interface {
	KindSuggestion() string
}

// Resolve settles the namespace of every object and checks the manifest as a
// whole, reporting every problem at once, in manifest order:
//
//   - a namespaced object without a namespace gets defaultNamespace;
//   - a cluster-scoped object with a namespace is an error
//     (ReasonNamespaceNotAllowed), as the API server would silently drop it
//     and the object would not be where the manifest says;
//   - the same object twice (same API group, kind, namespace and name; the
//     version does not matter, as apps/v1 and apps/v1beta1 name one object,
//     nor does the group of an Event: see StoredGroup) is an error
//     (ReasonDuplicateObject) naming both documents;
//   - a kind scope cannot place is an error: ReasonUnknownKind when it is not
//     served, ReasonDiscoveryFailed otherwise (the error wraps scope's).
//
// A kind the destination does not serve yet but that a
// CustomResourceDefinition of the same manifest defines is not unknown: it
// takes the scope the CustomResourceDefinition declares, so that a manifest
// can hold a CustomResourceDefinition and its objects (the
// CustomResourceDefinition is applied first, see Stage).
//
// Resolve returns deep copies of the objects that resolved without error, in
// input order; both objects of a duplicate are left out, since which one the
// author meant is unknown. It never changes objs. scope must not be nil.
func Resolve(objs []Object, defaultNamespace string, scope ScopeFunc) ([]Object, ErrorList) {
	type key struct{ group, kind, namespace, name string }
	var errs ErrorList
	crdScopes := declaredScopes(objs)
	resolved := make([]*Object, len(objs))
	first := make(map[key]int, len(objs))
	for i, o := range objs {
		if o.Object == nil {
			errs = append(errs, &Error{Index: o.Index, Line: o.Line, Reason: ReasonInvalidManifest, Message: "no object"})
			continue
		}
		u := o.Object.DeepCopy()
		gvk := u.GroupVersionKind()
		ns := u.GetNamespace()
		ok := true

		namespaced, err := scope(gvk)
		if err != nil && meta.IsNoMatchError(err) {
			if declared, found := crdScopes[gvk]; found {
				namespaced, err = declared, nil
			}
		}
		switch {
		case err != nil:
			errs = append(errs, scopeError(o, gvk, err))
			ok = false
			if ns == "" {
				// Best guess for the duplicate check below.
				ns = defaultNamespace
			}
		case namespaced && ns == "":
			if defaultNamespace == "" {
				errs = append(errs, &Error{Index: o.Index, Line: o.Line, Field: "metadata.namespace", Reason: ReasonInvalidManifest,
					Message: fmt.Sprintf("%s is namespaced but has no namespace, and there is no default namespace", describeObject(u))})
				ok = false
				break
			}
			ns = defaultNamespace
			u.SetNamespace(ns)
		case !namespaced && ns != "":
			errs = append(errs, &Error{Index: o.Index, Line: o.Line, Field: "metadata.namespace", Reason: ReasonNamespaceNotAllowed,
				Message: fmt.Sprintf("%s is cluster-scoped and cannot have a namespace; remove namespace %q", describeObject(u), ns)})
			ok = false
		case !namespaced:
			// Drops a `namespace: ""` the manifest may carry.
			u.SetNamespace("")
		}

		k := key{group: StoredGroup(gvk.Group, gvk.Kind), kind: gvk.Kind, namespace: ns, name: u.GetName()}
		if j, dup := first[k]; dup {
			errs = append(errs, &Error{Index: o.Index, Line: o.Line, Reason: ReasonDuplicateObject,
				Message: fmt.Sprintf("%s is also %s; an object (API group, kind, namespace and name) may appear only once in a manifest",
					describeObject(u), locate(objs[j]))})
			resolved[j] = nil
			continue
		}
		first[k] = i
		if ok {
			resolved[i] = &Object{Index: o.Index, Line: o.Line, KindLine: o.KindLine, Object: u}
		}
	}

	out := make([]Object, 0, len(objs))
	for _, o := range resolved {
		if o != nil {
			out = append(out, *o)
		}
	}
	sortErrors(errs)
	return out, errs
}

// scopeError reports a kind the ScopeFunc could not place.
func scopeError(o Object, gvk schema.GroupVersionKind, err error) *Error {
	if meta.IsNoMatchError(err) {
		msg := fmt.Sprintf("the destination does not serve kind %q of apiVersion %q (is its CustomResourceDefinition installed?)",
			gvk.Kind, gvk.GroupVersion().String())
		var s kindSuggester
		if errors.As(err, &s) {
			msg = fmt.Sprintf("the destination does not serve kind %q of apiVersion %q: %s", gvk.Kind, gvk.GroupVersion().String(), s.KindSuggestion())
		}
		return &Error{Index: o.Index, Line: lineOr(o.KindLine, o.Line), Field: "kind", Reason: ReasonUnknownKind, err: err, Message: msg}
	}
	return &Error{Index: o.Index, Line: lineOr(o.KindLine, o.Line), Field: "kind", Reason: ReasonDiscoveryFailed, err: err,
		Message: fmt.Sprintf("cannot tell whether %s of apiVersion %q is namespaced: %v", gvk.Kind, gvk.GroupVersion().String(), err)}
}

// declaredScopes returns the scope of every kind, in every version, that a
// CustomResourceDefinition of objs defines. Malformed definitions are
// skipped: the API server reports what is wrong with them when they are
// applied.
func declaredScopes(objs []Object) map[schema.GroupVersionKind]bool {
	scopes := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		if o.Object == nil || o.Object.GroupVersionKind().GroupKind() != crdGroupKind() {
			continue
		}
		spec := o.Object.Object
		group, _, _ := unstructured.NestedString(spec, "spec", "group")
		kind, _, _ := unstructured.NestedString(spec, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(spec, "spec", "scope")
		if group == "" || kind == "" || (scope != "Namespaced" && scope != "Cluster") {
			continue
		}
		var versions []string
		// NestedFieldNoCopy: the list is only read, so copying it is waste.
		if list, _, _ := unstructured.NestedFieldNoCopy(spec, "spec", "versions"); list != nil {
			list, _ := list.([]any)
			for _, v := range list {
				if m, ok := v.(map[string]any); ok {
					if name, ok := m["name"].(string); ok && name != "" {
						versions = append(versions, name)
					}
				}
			}
		}
		// apiextensions.k8s.io/v1beta1 had a single spec.version.
		if v, _, _ := unstructured.NestedString(spec, "spec", "version"); v != "" {
			versions = append(versions, v)
		}
		for _, v := range versions {
			scopes[schema.GroupVersionKind{Group: group, Version: v, Kind: kind}] = scope == "Namespaced"
		}
	}
	return scopes
}

// describeObject names an object for messages: `Deployment.apps "web" in
// namespace "shop"`, or `Namespace "shop"`.
func describeObject(u *unstructured.Unstructured) string {
	s := u.GroupVersionKind().GroupKind().String() + " " + strconv.Quote(u.GetName())
	if ns := u.GetNamespace(); ns != "" {
		s += " in namespace " + strconv.Quote(ns)
	}
	return s
}

// locate names the document of an object for messages.
func locate(o Object) string {
	if o.Line > 0 {
		return fmt.Sprintf("document %d (line %d)", DocumentNumber(o.Index), o.Line)
	}
	return fmt.Sprintf("document %d", DocumentNumber(o.Index))
}

// StoredGroup is the API group of the kind the API server stores an object
// of group and kind as, so that two names of one object compare equal. An
// Event of events.k8s.io is the core Event of the same name, served in two
// groups: keyed apart, a manifest that moved an Event from one to the other
// would have its inventory prune the object it still declares.
func StoredGroup(group, kind string) string {
	if group == "events.k8s.io" && kind == "Event" {
		return ""
	}
	return group
}
