// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
)

// The receiver serves TLS only, within its own limits, and answers a
// request for a sync it does not know with the one refusal.
func TestTheWebhookReceiverServesTLSWithinItsLimits(t *testing.T) {
	ctx := klog.NewContext(t.Context(), logr.Discard())
	o := &Operator{opts: Options{WebhookAddr: "127.0.0.1:0", Metrics: prometheus.NewRegistry()}, webhooks: webhook.NewRegistry()}
	o.receiver = o.newWebhookReceiver(ctx)
	srvs, err := o.serve(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srvs.shutdown)
	if len(srvs) != 1 {
		t.Fatalf("%d servers, want the receiver alone", len(srvs))
	}
	srv := srvs[0]
	got := serverLimits{readHeader: srv.ReadHeaderTimeout, read: srv.ReadTimeout, write: srv.WriteTimeout, idle: srv.IdleTimeout, maxHeaderBytes: srv.MaxHeaderBytes, maxConns: webhookLimits.maxConns}
	if got != webhookLimits {
		t.Errorf("the receiver's limits: %+v, want %+v", got, webhookLimits)
	}
	addr := o.WebhookAddr()
	body := `{"event":"infrahub.artifact.updated"}`
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Post("http://"+addr+"/hooks/infrahub/ns/sync", "application/json", strings.NewReader(body)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP answered %d; want the TLS server's 400", resp.StatusCode)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+addr+"/hooks/infrahub/ns/sync", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderID, "msg_1")
	req.Header.Set(webhook.HeaderTimestamp, "1")
	req.Header.Set(webhook.HeaderSignature, "v1,AAAA")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned request answered %d, want 401", resp.StatusCode)
	}
	resp, err = client.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the receiver answered %d, want 404", resp.StatusCode)
	}
}
