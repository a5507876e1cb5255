// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook receives Infrahub's signed artifact webhooks and turns a
// verified one into a wake-up of one InfrahubSync, never into content.
//
// Infrahub (since 1.2.0) posts infrahub.artifact.created and
// infrahub.artifact.updated events to a CoreStandardWebhook's URL, signed
// with the Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature: v1,<base64 HMAC-SHA256(shared key, "{id}.{ts}.{body}")>)
// and the raw shared key. The Receiver serves one path per sync,
// /hooks/infrahub/{namespace}/{name}, and decides every request with pure
// functions (verify.go, spaced.go, event.go) before it does anything:
//
//   - what is not a bounded JSON POST is refused before it is read;
//   - a timestamp outside ±5 minutes, a sync the Registry does not hold,
//     a signature that does not verify and a webhook-id seen before all get
//     the same 401, after the same work (an unknown sync's request is
//     verified against a random key), so that nobody learns which syncs
//     exist;
//   - a verified event that names an artifact the sync holds (or any
//     created event of the sync's branch) wakes the sync through Wake;
//     anything else verified is acknowledged and ignored.
//
// The Receiver holds no Kubernetes or Infrahub client: the shared keys, the
// branch and the artifacts of each sync are put in the Registry by the
// InfrahubSync controller when it reads the sync's Secret during a pass, so
// a flood of requests, naming any number of syncs, costs memory lookups and
// at most two HMACs each, never a request to the API server or Infrahub.
// Every request is counted in vidra_infrahubsync_webhooks_total{verdict}.
package webhook
