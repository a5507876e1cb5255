// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// TriggerWebhook: a verified Infrahub webhook named an artifact of the sync.
const TriggerWebhook Trigger = "webhook"

// minWebhookGap is the rate limit of webhook passes per sync: at most two a
// second. Events in between coalesce into the next pass (the queue holds a
// key once), so a storm of renders in Infrahub costs a sync two passes a
// second, not one per event.
const minWebhookGap = 500 * time.Millisecond

// maxSharedKeyBytes bounds the shared key read from the webhook Secret.
const maxSharedKeyBytes = 4 << 10

// hints are what the webhooks that woke a sync asked for since its last
// pass: artifacts to look at again, or a whole pass.
type hints struct {
	artifacts map[string]webhook.Wake
	full      bool
}

// Wake enqueues the sync of key for a verified, relevant webhook, at most
// every minWebhookGap, and remembers what it asked for. It never blocks.
func (c *Controller) Wake(key cache.ObjectName, w webhook.Wake) {
	c.mu.Lock()
	h := c.hints[key]
	if h == nil {
		h = &hints{artifacts: map[string]webhook.Wake{}}
		c.hints[key] = h
	}
	// The receiver wakes only for artifacts the sync holds, at most
	// MaxSyncArtifacts; past that, a whole pass is as cheap.
	if w.Full || len(h.artifacts) >= v1alpha1.MaxSyncArtifacts {
		h.full = true
	} else {
		h.artifacts[w.ArtifactID] = w
	}
	delay := minWebhookGap - c.clock.Since(c.lastWebhookPass[key])
	c.mu.Unlock()
	c.noteTrigger(key, TriggerWebhook)
	if delay > 0 {
		// The delaying queue holds a key once: later events wait with it.
		c.queue.AddAfter(key, delay)
		return
	}
	c.queue.Add(key)
}

// takeHints returns and clears what webhooks asked of the sync of key; a
// webhook pass is timed for the rate limit.
func (c *Controller) takeHints(key cache.ObjectName, trigger Trigger) *hints {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hints[key]
	delete(c.hints, key)
	if trigger == TriggerWebhook {
		c.lastWebhookPass[key] = c.clock.Now()
	}
	return h
}

// pollDue reports whether the sync of key last asked Infrahub for its
// whole list at least interval ago (or never, here). A webhook pass that finds the poll due makes a whole pass
// instead: a stream of webhooks never holds back the poll that catches
// deletions, and a poll's timer that fires with a webhook's trigger noted
// still polls.
func (c *Controller) pollDue(key cache.ObjectName, interval time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.lastPoll[key]
	return !ok || c.clock.Since(last) >= interval
}

// polled notes a whole pass of the sync of key.
func (c *Controller) polled(key cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastPoll[key] = c.clock.Now()
}

// forgetWebhook drops what is held for the webhooks of a sync that went.
func (c *Controller) forgetWebhook(key cache.ObjectName) {
	c.mu.Lock()
	delete(c.hints, key)
	delete(c.lastWebhookPass, key)
	delete(c.lastPoll, key)
	c.mu.Unlock()
	if c.webhooks != nil {
		c.webhooks.Remove(key)
	}
}

// webhookKey returns the shared key of the sync's webhook, read from its
// Secret as the sync's ServiceAccount (the credentials' rules) at every
// pass but a webhook's, which keeps the key it was verified with: a key
// rotated in the Secret is taken at the next poll. nil means no webhook,
// or a Secret that cannot be used (reported by a Warning Event; the poll
// goes on).
func (c *Controller) webhookKey(ctx context.Context, sync *v1alpha1.InfrahubSync, trigger Trigger) []byte {
	if c.webhooks == nil || sync.Spec.Webhook == nil {
		return nil
	}
	key := cache.MetaObjectToName(sync)
	if e, ok := c.webhooks.Get(key); ok && e.UID == sync.UID && trigger == TriggerWebhook {
		return e.Key
	}
	sa, _, err := c.actingServiceAccount(sync)
	var s *corev1.Secret
	if err == nil {
		s, err = c.readSecret(ctx, sync, sync.Spec.Webhook.SecretRef.Name, sa, "spec.webhook.secretRef")
	}
	if err == nil {
		k := s.Data[v1alpha1.WebhookSharedKey]
		if len(k) > 0 && len(k) <= maxSharedKeyBytes {
			return k
		}
		err = fmt.Errorf("Secret %s/%s named by spec.webhook.secretRef has no key %s of 1 to %d bytes", sync.Namespace, sync.Spec.Webhook.SecretRef.Name, v1alpha1.WebhookSharedKey, maxSharedKeyBytes)
	}
	c.recorder.Event(sync, true, v1alpha1.ReasonWebhookUnavailable,
		"webhooks are refused until this is fixed, and changes come with the poll: %v", err)
	return nil
}

// publish tells the receiver what it needs of the sync after a pass: its
// key, branch and the checksum applied of each artifact it holds.
func (c *Controller) publish(sync *v1alpha1.InfrahubSync, key []byte, st *status) {
	if c.webhooks == nil {
		return
	}
	name := cache.MetaObjectToName(sync)
	if key == nil {
		c.webhooks.Remove(name)
		return
	}
	out := st.build()
	applied := make(map[string]string, len(out.Artifacts))
	for _, a := range out.Artifacts {
		if a.VidraResource != "" {
			applied[a.ID] = a.Checksum
		}
	}
	c.webhooks.Set(name, &webhook.Entry{UID: sync.UID, Key: key, Target: webhook.Target{Branch: st.branch(), Applied: applied}})
}

// targeted reports whether a webhook pass may look at the hinted artifacts
// alone: each is one the sync holds, with a child of its own. Otherwise
// (a created artifact it does not hold, a child gone) the pass is whole.
func (c *Controller) targeted(sync *v1alpha1.InfrahubSync, h *hints) bool {
	if h == nil || h.full || len(h.artifacts) == 0 {
		return false
	}
	for id := range h.artifacts {
		i := slices.IndexFunc(sync.Status.Artifacts, func(a v1alpha1.SyncedArtifact) bool { return a.ID == id })
		if i < 0 || sync.Status.Artifacts[i].VidraResource == "" {
			return false
		}
		if child := c.childOf(sync, id); child == nil || !Owns(sync, child) {
			return false
		}
	}
	return true
}

// syncHinted is the pass of a webhook: it asks Infrahub for the content of
// the hinted artifacts only (no query), and writes a child whose checksum,
// computed from what was downloaded, differs from the one applied. The
// event's checksum only spares a download when it is the one applied.
func (c *Controller) syncHinted(ctx context.Context, sync *v1alpha1.InfrahubSync, isrc infrahub.Source, src ArtifactSource, h *hints, st *status) error {
	logger := klog.FromContext(ctx)
	for _, a := range sync.Status.Artifacts {
		st.artifacts[a.ID] = a
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(h.artifacts)) {
		w := h.artifacts[id]
		prev := st.artifacts[id]
		child := c.childOf(sync, id)
		if child == nil {
			// Deleted since: its deletion wakes a whole pass.
			continue
		}
		if w.Checksum != "" && child.Annotations[v1alpha1.ArtifactChecksumAnnotation] == w.Checksum {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, apiTimeout+infrahub.DefaultTimeout)
		content, err := src.Download(callCtx, isrc, id)
		cancel()
		a := infrahub.Artifact{ID: id, Name: prev.Name, Target: prev.Target, Checksum: content.Checksum, ContentType: content.ContentType}
		if problem := contentProblem(a, content, err); problem != "" {
			c.metrics.Downloads.WithLabelValues("refused").Inc()
			a.Checksum = w.Checksum
			st.skipped(Skip{Artifact: a, Problem: problem, Reason: v1alpha1.ReasonArtifactsNotApplied, Kept: true}, prev.LastChanged)
			continue
		}
		if err != nil {
			c.metrics.Downloads.WithLabelValues("error").Inc()
			st.unavailable(err)
			errs = append(errs, err)
			continue
		}
		c.metrics.Downloads.WithLabelValues("applied").Inc()
		if content.Checksum == child.Annotations[v1alpha1.ArtifactChecksumAnnotation] {
			// A late delivery: what Infrahub holds now is applied.
			continue
		}
		// The storage id is a record only; it is taken from the event when
		// the event's checksum is the content's, and the sync's query
		// gives storage ids at all.
		if prev.StorageID != "" && w.Checksum == content.Checksum {
			a.StorageID = w.StorageID
		}
		if err := c.write(ctx, sync, a, string(content.Data), child); err != nil {
			errs = append(errs, err)
			st.failed(a, err)
			continue
		}
		logger.V(2).Info("Applied artifact", "artifact", id, "checksum", a.Checksum)
		st.changed(a)
	}
	if len(errs) > 0 {
		return fmt.Errorf("webhook pass: %w", errs[0])
	}
	return nil
}
