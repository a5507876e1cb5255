// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/shard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	vidrainformers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
)

// The floor: what the API server needs to converge the scale run's
// resources through an operator that costs nothing. A client in the bench
// sends, per resource, the requests Vidra's first converge sends (the
// resource's create, four non-forced applies of the marked objects with
// Vidra's create-only resourceVersion, one status write, each answered as
// metadata, in JSON where Vidra asks for protobuf, a little dearer) and
// keeps open the watches Vidra keeps (the four kinds and the resources),
// on a fresh control plane of its own. It reads nothing, decides nothing
// and computes no health. Its time against kubectl's is the ratio an
// operator of this design can reach on the machine; Vidra's converge
// against it is what Vidra itself adds.

// floorResult is the floor's figures.
type floorResult struct {
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"objectsPerSecond"`
	// VsBaseline is kubectl's time over the floor's: above 1 is faster.
	VsBaseline float64 `json:"vsBaseline,omitempty"`
	// CPUMsPerResource is what each control plane process used per
	// resource while the floor ran, and the bench's own process: the
	// floor's client and the converge tracker's informer.
	CPUMsPerResource map[string]float64 `json:"cpuMsPerResource"`
	Requests         int                `json:"requests"`
}

// floorKinds are the scale manifest's kinds, in the order Vidra applies them.
var floorKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{"ServiceAccount", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}},
	{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	{"Service", schema.GroupVersionResource{Version: "v1", Resource: "services"}},
	{"Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
}

func scaleFloor(ctx context.Context, o options) (*floorResult, error) {
	c, cleanup, err := scaleCluster(ctx, o, "floor", o.apiserverPprof)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	dir := c.dir
	cfg, err := c.operatorConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	vidra, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := rest.RESTClientFor(metadataConfig(cfg))
	if err != nil {
		return nil, err
	}

	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = managedSelector })
	for _, k := range floorKinds {
		df.ForResource(k.gvr).Informer()
	}
	vf := vidrainformers.NewSharedInformerFactory(vidra, 0)
	vf.Infrahub().V1alpha1().VidraResources().Informer()
	df.Start(watchCtx.Done())
	vf.Start(watchCtx.Done())
	df.WaitForCacheSync(watchCtx.Done())
	vf.WaitForCacheSync(watchCtx.Done())

	tracker := newConvergeTracker(scalePrefix, o.n)
	if err := startTracker(watchCtx, c, tracker); err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	mark := audit.mark()
	cpu0, self0 := c.cpu(), cpuSeconds(os.Getpid())
	logf("scale floor: %d resources (%d objects) by a client that only sends Vidra's requests", o.n, 4*o.n)
	began := time.Now()
	waitAPIServer := c.profileAPIServer(ctx, o.apiserverPprof, 10*time.Second, filepath.Join(dir, "floor.apiserver.cpu.pprof"))
	err = parallelDo(ctx, o.n, o.creators, func(ctx context.Context, i int) error {
		return floorResource(ctx, vidra, raw, i)
	})
	if err != nil {
		return nil, err
	}
	select {
	case <-tracker.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	took := tracker.doneAt.Sub(began)
	cpu := c.cpu().since(cpu0)
	cpu["bench"] = cpuSeconds(os.Getpid()) - self0
	waitAPIServer()
	stopWatches()
	time.Sleep(time.Second) // the audit log trails the responses a little
	reqs, err := audit.requests(operatorUser, mark, began, began.Add(took))
	if err != nil {
		return nil, err
	}
	f := &floorResult{
		Seconds:          round(took.Seconds(), 2),
		PerSec:           round(float64(4*o.n)/took.Seconds(), 1),
		CPUMsPerResource: perResource(cpu, o.n),
		Requests:         reqs.Total,
	}
	logf("scale floor: %d objects in %.1f s (%.0f objects/s), %d requests", 4*o.n, f.Seconds, f.PerSec, f.Requests)
	return f, nil
}

// floorResource creates resource i and sends what Vidra's first reconcile
// of it sends.
func floorResource(ctx context.Context, vidra versioned.Interface, raw *rest.RESTClient, i int) error {
	key := scaleKey(i)
	vr, err := vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Create(ctx, scaleResource(i), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create VidraResource %s: %w", key, err)
	}
	docs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(scaleManifest(i), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		docs[u.GetKind()] = u
	}
	now := metav1.Now()
	st := v1alpha1.VidraResourceStatus{
		ObservedGeneration: vr.Generation, DeployState: v1alpha1.DeployStateSucceeded, ManagedCount: 4,
		LastSyncTime: &now, HealthCheckStartTime: &now,
	}
	for _, k := range floorKinds {
		kind, gvr := k.kind, k.gvr
		u := docs[kind]
		u.SetNamespace(key.Namespace)
		u.SetLabels(map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel: string(vr.UID),
			v1alpha1.BucketLabel: shard.BucketLabel(key)})
		u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: key.String()})
		u.SetResourceVersion(createOnlyVersion)
		body, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		prefix := "/api"
		if gvr.Group != "" {
			prefix = "/apis/" + gvr.Group
		}
		err = raw.Patch(types.ApplyYAMLPatchType).AbsPath(prefix, gvr.Version, "namespaces", key.Namespace, gvr.Resource, u.GetName()).
			Param("fieldManager", v1alpha1.FieldManager).Param("force", "false").
			SetHeader("Accept", metadataOnly).Body(body).Do(ctx).Error()
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", kind, key, err)
		}
		st.ManagedResources = append(st.ManagedResources, v1alpha1.ManagedResource{
			APIVersion: u.GetAPIVersion(), Kind: kind, Namespace: key.Namespace, Name: u.GetName(), Health: "Current",
		})
	}
	msg := "Applied 4 objects"
	st.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled, Message: msg, ObservedGeneration: vr.Generation, LastTransitionTime: now},
		{Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllCurrent, Message: "Every object is Current", ObservedGeneration: vr.Generation, LastTransitionTime: now},
	}
	vr.Status = st
	vr.APIVersion, vr.Kind = v1alpha1.SchemeGroupVersion.String(), "VidraResource" // a typed answer has neither
	body, err := json.Marshal(vr)
	if err != nil {
		return err
	}
	err = raw.Put().AbsPath("/apis", v1alpha1.SchemeGroupVersion.Group, v1alpha1.SchemeGroupVersion.Version, "namespaces", key.Namespace, v1alpha1.ResourcePlural, key.Name, "status").
		Param("fieldManager", v1alpha1.StatusFieldManager).SetHeader("Accept", metadataOnly).Body(body).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("status of %s: %w", key, err)
	}
	return nil
}

// scaleResource is the scale run's resource i.
func scaleResource(i int) *v1alpha1.VidraResource {
	key := scaleKey(i)
	return &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{benchLabel: "scale"}},
		Spec: v1alpha1.VidraResourceSpec{Manifest: scaleManifest(i), Destination: v1alpha1.Destination{ReconcileOnEvents: ptr.To(true)}}}
}

// operatorConfig is a client configuration with the operator's identity,
// so that the floor's requests pay the same audit cost as Vidra's, and no
// client-side throttle: the floor measures the API server, not a limiter.
func (c *cluster) operatorConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg, nil
}

// createOnlyVersion is the resourceVersion with which Vidra's applies
// create (internal/apply): a precondition only a creation meets.
const createOnlyVersion = "9223372036854775807"

// metadataOnly is the Accept header of Vidra's writes: the answer as
// PartialObjectMetadata.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// metadataConfig is cfg for a raw REST client of JSON bodies.
func metadataConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.ContentType = "application/json"
	return c
}

// perResource turns CPU seconds into milliseconds per resource.
func perResource(cpu map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range cpu {
		out[k] = round(v*1000/float64(n), 2)
	}
	return out
}

// floorDriftLabel marks the ConfigMaps of the drift floor; Vidra's
// informers do not select them.
const floorDriftLabel = "bench.vidra.dev/floor-drift"

// driftFloor is, with every object of the run watched, the fastest repair
// of a deleted ConfigMap that a watch allows: ConfigMaps Vidra does not
// manage, each deleted as Vidra's are, put back by a client of the bench's
// that applies the object as Vidra's repair does (with the operator's
// identity and a creating apply) as soon as a watch of its own delivers the
// delete, a watch like Vidra's informers': cluster-wide, label-selected,
// metadata-only in protobuf. The same two passes through the API server as
// Vidra's repair and the same request, with no informer, queue or reconcile
// between them. Its samples are taken between Vidra's, so that both meet
// the same machine.
type driftFloor struct {
	c    *cluster
	keys []cache.ObjectName
	stop context.CancelFunc
	done chan struct{}
}

// startDriftFloor creates the floor's ConfigMaps, one for each of samples,
// in namespaces of the run, and starts the watch that repairs them.
func startDriftFloor(ctx context.Context, c *cluster, n, samples int, rng *rand.Rand) (*driftFloor, error) {
	f := &driftFloor{c: c, keys: make([]cache.ObjectName, samples), done: make(chan struct{})}
	for i := range f.keys {
		k := scaleKey(rng.IntN(n))
		f.keys[i] = cache.ObjectName{Namespace: k.Namespace, Name: fmt.Sprintf("floor-drift-%d", i)}
	}
	cfg, err := c.operatorConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	cms := dyn.Resource(configMaps)
	// Vidra's repair of a deleted object: a server-side apply that can
	// only create, its answer decoded as Vidra decodes it.
	apply := func(ctx context.Context, key cache.ObjectName) error {
		// Marshalling maps of strings cannot fail.
		body, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace, "labels": map[string]string{floorDriftLabel: "1"},
				"resourceVersion": createOnlyVersion},
			"data": map[string]string{"greeting": "hello"},
		})
		_, err := cms.Namespace(key.Namespace).Patch(ctx, key.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "bench-floor", Force: ptr.To(false)})
		return err
	}
	for _, key := range f.keys {
		if err := apply(ctx, key); err != nil {
			f.deleteAll(ctx)
			return nil, fmt.Errorf("drift floor: %w", err)
		}
	}
	repairCtx, stop := context.WithCancel(ctx)
	w, err := md.Resource(configMaps).Namespace(metav1.NamespaceAll).
		Watch(repairCtx, metav1.ListOptions{LabelSelector: floorDriftLabel + "=1"})
	if err != nil {
		stop()
		f.deleteAll(ctx)
		return nil, err
	}
	f.stop = stop
	go func() {
		defer close(f.done)
		defer w.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ok && ev.Type == watch.Deleted {
					if err := apply(repairCtx, cache.MetaObjectToName(m)); err != nil && repairCtx.Err() == nil {
						logf("drift floor: %v", err)
					}
				}
			case <-repairCtx.Done():
				return
			}
		}
	}()
	return f, nil
}

// sample times the repair of the floor's i-th ConfigMap, as timeRepair.
func (f *driftFloor) sample(ctx context.Context, i int) (repaired, seen time.Duration, err error) {
	return timeRepair(ctx, f.c, f.keys[i], 30*time.Second)
}

// close stops the repairing watch and deletes the floor's ConfigMaps.
func (f *driftFloor) close(ctx context.Context) {
	f.stop()
	<-f.done
	f.deleteAll(ctx)
}

func (f *driftFloor) deleteAll(ctx context.Context) {
	for _, key := range f.keys {
		_ = f.c.kube.CoreV1().ConfigMaps(key.Namespace).Delete(context.WithoutCancel(ctx), key.Name, metav1.DeleteOptions{})
	}
}
