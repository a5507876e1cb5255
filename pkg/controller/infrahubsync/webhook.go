// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
)

// TriggerWebhook: a verified Infrahub webhook named an artifact of the sync.
const TriggerWebhook Trigger = "webhook"

// Wake enqueues the sync of key for a verified, relevant webhook.
func (c *Controller) Wake(key cache.ObjectName, _ webhook.Wake) {
	c.enqueue(key, TriggerWebhook)
}
