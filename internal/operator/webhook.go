// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	"github.com/vidra-operator/vidra/internal/securemetrics"
)

// webhookLimits bound the receiver of Infrahub's webhooks, reachable from
// wherever the Service is exposed: Infrahub's worker posts a body under
// 1 KiB and waits for the answer, so 5 s for headers and 10 s for the
// whole request are generous; 16 KiB of headers hold the three signing
// headers many times over. 128 connections at once let Infrahub's workers
// deliver in parallel and keep a flood's goroutines and TLS buffers under
// some 15 MiB.
var webhookLimits = serverLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 10 * time.Second,
	idle: 90 * time.Second, maxHeaderBytes: 16 << 10, maxConns: 128}

// newWebhookReceiver builds the receiver when --webhook-bind-address is set.
func (o *Operator) newWebhookReceiver(ctx context.Context) *webhook.Receiver {
	if off(o.opts.WebhookAddr) {
		return nil
	}
	return webhook.NewReceiver(webhook.Options{
		Registry:   o.webhooks,
		Registerer: o.opts.Metrics,
		Logger:     klog.FromContext(ctx).WithName("webhook"),
		Wake: func(key cache.ObjectName, w webhook.Wake) {
			if o.Syncs != nil {
				o.Syncs.Wake(key, w)
			}
		},
	})
}

// webhookHandler serves the receiver at its path prefix, and nothing else.
func webhookHandler(r *webhook.Receiver) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(webhook.PathPrefix, r)
	return mux
}

// serveWebhooks starts the receiver's server over TLS: a self-signed
// certificate, or --webhook-cert-dir's, reloaded as the metrics' is.
func (o *Operator) serveWebhooks(ctx context.Context, start func(addr string, h http.Handler, served *string, tlsConfig *tls.Config, limits serverLimits) error) error {
	if o.receiver == nil {
		return nil
	}
	logger := klog.FromContext(ctx).WithName("webhook")
	cfg, err := securemetrics.TLSConfig(o.opts.WebhookCertDir, logger)
	if err != nil {
		return fmt.Errorf("--webhook-cert-dir %q: %w", o.opts.WebhookCertDir, err)
	}
	if err := start(o.opts.WebhookAddr, webhookHandler(o.receiver), &o.servedWebhook, cfg, webhookLimits); err != nil {
		return err
	}
	certificate := "self-signed, generated at start"
	if o.opts.WebhookCertDir != "" {
		certificate = o.opts.WebhookCertDir
	}
	logger.Info("Receiving Infrahub webhooks over TLS", "address", o.opts.WebhookAddr, "path", webhook.PathPrefix+"{namespace}/{name}", "certificate", certificate)
	return nil
}

// WebhookAddr returns the address the webhook receiver listens on, empty
// until Run has started it (or when it is off).
func (o *Operator) WebhookAddr() string {
	o.servedMu.Lock()
	defer o.servedMu.Unlock()
	return o.servedWebhook
}

// Webhooks returns the receiver of Infrahub's webhooks, nil when off.
func (o *Operator) Webhooks() *webhook.Receiver { return o.receiver }

func off(addr string) bool { return addr == "" || addr == "0" }
