// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// LocalCluster is the watch registry's name for the cluster Vidra runs in.
const LocalCluster = ""

// inClusterServer is how manifests name the cluster Vidra runs in.
const inClusterServer = "https://kubernetes.default.svc"

// Target is where one VidraResource's objects go, with the identity that
// writes them.
type Target struct {
	// Cluster keys the watch registry and the RESTMapper.
	Cluster string
	// Client reads and writes objects, impersonating the resource's
	// ServiceAccount when it names one.
	Client dynamic.Interface
	// Meta sends the writes whose answer Vidra reads only the metadata of
	// (applies above all): the API server answers with the object's
	// metadata, in protobuf where it can, which costs both sides far less
	// than encoding and decoding the whole object as JSON.
	Meta   metadata.Interface
	Mapper *Mapper
	// ServiceAccount is the impersonated identity, namespace/name, or ""
	// for the operator's own.
	ServiceAccount string

	// own reads with the operator's identity what is not the resource's to
	// read (NamespaceDeleting).
	own metadata.Interface
}

// NamespaceDeleting reports whether namespace ns of the destination is being
// deleted, so that a cleanup leaves its objects to the namespace's deletion.
// It asks with the operator's own identity: a ServiceAccount a resource acts
// as seldom may read namespaces, and the RoleBinding that lets it act is
// often deleted with the namespace, before the resource's cleanup runs. An
// error (the namespace gone, or unreadable) counts as not being deleted.
func (t *Target) NamespaceDeleting(ctx context.Context, ns string) bool {
	// The metadata client puts ns in the request's path unchecked: a name
	// that is none ("kube-system/services/x:443/proxy") would make the
	// operator's identity ask another path.
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return false
	}
	obj, err := t.own.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
	return err == nil && obj.GetDeletionTimestamp() != nil
}
