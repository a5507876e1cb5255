package destination

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// largeAnswer is the size past which an answer of a remote request client
// is read, and decoded, under a slot of answerSlots. Objects are a few KiB;
// answers past 1 MiB are discovery documents of clusters with many CRDs,
// the largest objects, and what a server of the tenant's sends to fill the
// operator's memory: each worker may be reading one, and one 8 MiB answer
// costs some 40 MiB (copies of its text and the decoded object).
const largeAnswer = 1 << 20

// largeAnswersAtOnce is how many large answers the request clients of all
// remote clusters read and decode at once.
const largeAnswersAtOnce = 2

// answerSlots bound the large answers of remote request clients being read
// and decoded at once: largeAnswersAtOnce in all, one per namespace, so that
// one tenant's servers cannot take every slot, and other tenants' large
// answers wait for two hostile namespaces at most. Small answers, almost
// all of them, take no slot.
type answerSlots struct {
	global chan struct{}

	mu         sync.Mutex
	namespaces map[string]chan struct{}
}

func newAnswerSlots() *answerSlots {
	return &answerSlots{global: make(chan struct{}, largeAnswersAtOnce), namespaces: map[string]chan struct{}{}}
}

// slotWaitError says that a request gave up waiting for a slot: the time of
// the request ran out while other large answers were read. It says nothing
// of the server, and opens no breaker.
type slotWaitError struct {
	server string
	err    error
}

func (e *slotWaitError) Error() string {
	return fmt.Sprintf("the answer of %s was not read: its time ran out while other large answers of remote clusters were read (%v); it is tried again", e.server, e.err)
}

func (e *slotWaitError) Unwrap() error { return e.err }

// acquire waits for a slot of namespace and one of all, and returns what
// lets them go. A call that holds a slot already (see withAnswerHold) takes
// no other: its answers are read one after the other.
func (s *answerSlots) acquire(ctx context.Context, server, namespace string) (func(), error) {
	h := holdOf(ctx)
	if h != nil && h.holding() {
		return func() {}, nil
	}
	s.mu.Lock()
	ns, ok := s.namespaces[namespace]
	if !ok {
		ns = make(chan struct{}, 1)
		s.namespaces[namespace] = ns
	}
	s.mu.Unlock()
	if waited, ok := ctx.Value(slotWaitKey{}).(*time.Duration); ok {
		start := time.Now()
		defer func() { *waited += time.Since(start) }()
	}
	select {
	case ns <- struct{}{}:
	case <-ctx.Done():
		return nil, &slotWaitError{server: server, err: ctx.Err()}
	}
	select {
	case s.global <- struct{}{}:
	case <-ctx.Done():
		<-ns
		return nil, &slotWaitError{server: server, err: ctx.Err()}
	}
	var once sync.Once
	return func() { once.Do(func() { <-s.global; <-ns }) }, nil
}

// answerHold keeps the slots of the large answers of one client call until
// the call has decoded them: client-go decodes an answer after it has read
// and closed its body, which is where the memory goes.
type answerHold struct {
	mu      sync.Mutex
	release []func()
}

type holdKey struct{}

// slotWaitKey is the key of the time a request waited for a slot, which
// the circuit breaker does not count as the server's.
type slotWaitKey struct{}

// withAnswerHold returns a context whose requests' slots are kept until
// done is called.
func withAnswerHold(ctx context.Context) (context.Context, func()) {
	h := &answerHold{}
	return context.WithValue(ctx, holdKey{}, h), h.done
}

func holdOf(ctx context.Context) *answerHold {
	h, _ := ctx.Value(holdKey{}).(*answerHold)
	return h
}

func (h *answerHold) keep(release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release = append(h.release, release)
}

func (h *answerHold) holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.release) > 0
}

func (h *answerHold) done() {
	h.mu.Lock()
	release := h.release
	h.release = nil
	h.mu.Unlock()
	for _, r := range release {
		r()
	}
}

// heldDynamic is the dynamic client of a remote cluster's requests: each
// call that decodes an object keeps the slot of a large answer (see
// answerSlots) until it has.
type heldDynamic struct{ dynamic.Interface }

func (d heldDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	all := d.Interface.Resource(gvr)
	return heldNamespaceable{heldResource{all}, all}
}

type heldNamespaceable struct {
	heldResource
	all dynamic.NamespaceableResourceInterface
}

func (r heldNamespaceable) Namespace(ns string) dynamic.ResourceInterface {
	return heldResource{r.all.Namespace(ns)}
}

type heldResource struct{ dynamic.ResourceInterface }

func (r heldResource) Create(ctx context.Context, obj *unstructured.Unstructured, options metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.Create(ctx, obj, options, subresources...)
}

func (r heldResource) Update(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.Update(ctx, obj, options, subresources...)
}

func (r heldResource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.UpdateStatus(ctx, obj, options)
}

func (r heldResource) Get(ctx context.Context, name string, options metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.Get(ctx, name, options, subresources...)
}

func (r heldResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.List(ctx, opts)
}

func (r heldResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.Patch(ctx, name, pt, data, options, subresources...)
}

func (r heldResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.Apply(ctx, name, obj, options, subresources...)
}

func (r heldResource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	ctx, done := withAnswerHold(ctx)
	defer done()
	return r.ResourceInterface.ApplyStatus(ctx, name, obj, options)
}
