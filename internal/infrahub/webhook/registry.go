// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Entry is what the receiver may know of one sync: its shared key and what
// decides whether an event concerns it. Entries are replaced, never
// changed, so that a reader needs no lock once it holds one.
type Entry struct {
	// UID is the sync's, so that a sync deleted and created again under
	// the same name never verifies with the old one's key.
	UID types.UID
	// Key is the raw shared key (spec.webhook.secretRef's sharedKey).
	Key []byte
	Target
}

// Registry holds the entries of the syncs that have a webhook, written by
// the InfrahubSync controller at each pass and read by the Receiver. It
// holds one entry per such sync, never one per request.
type Registry struct {
	mu      sync.RWMutex
	entries map[cache.ObjectName]*Entry
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{entries: map[cache.ObjectName]*Entry{}} }

// Set replaces the entry of key; e must not be changed afterwards.
func (r *Registry) Set(key cache.ObjectName, e *Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[key] = e
}

// Remove drops the entry of key: its webhooks are refused as unknown.
func (r *Registry) Remove(key cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, key)
}

// Get returns the entry of key.
func (r *Registry) Get(key cache.ObjectName) (*Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[key]
	return e, ok
}

// Len is the number of entries.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.entries)
}
