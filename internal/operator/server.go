// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/securemetrics"
)

func metav1ObjectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

type servers []*http.Server

func (s servers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s {
		_ = srv.Shutdown(ctx)
	}
}

// serverLimits bound what one client can hold of a server: for how long,
// and how many connections at once. Both servers are reachable from the pod
// network, by clients that need not be the scraper or the kubelet.
type serverLimits struct {
	// readHeader bounds the request headers, and the TLS handshake too:
	// the server takes the least of readHeader, read and write for it.
	readHeader time.Duration
	// read bounds the whole request, body included, from the end of the
	// handshake (on a connection kept alive, from the request's first
	// bytes). A GET has no body, but one that announces a body and never
	// sends it would otherwise hold its connection for ever, as the server
	// waits to discard the body. Past it the server also ends the context
	// of a request whose body it has read, a GET's: it must outlast the
	// reviews.
	read time.Duration
	// write bounds the handler and its answer, from the end of the
	// headers.
	write time.Duration
	// idle is how long a kept-alive connection waits for its next request.
	idle time.Duration
	// maxHeaderBytes bounds the request line and headers (with the 4 KiB
	// the server allows beyond it).
	maxHeaderBytes int
	// maxConns caps the connections open at once; 0 leaves them uncapped.
	maxConns int
}

var (
	// metricsLimits: 5 s is a round trip or two for a handshake or headers;
	// 10 s covers a request whose reviews take their worst, a 1 s wait for
	// a slot and 5 s of reviews; 30 s covers that and a scrape of tens of
	// thousands of series, which takes about a second, and is above the
	// 10 s after which Prometheus gives up on a scrape by default; 90 s
	// outlasts Prometheus's default scrape interval of a minute, so that a
	// scraper keeps its connection, and skips a handshake, between
	// scrapes. A bearer token is a few KiB at most: 64 KiB of headers is
	// room enough, where the default of 1 MiB is room for nothing but
	// abuse.
	//
	// 64 connections are more than the few scrapers of a cluster (a
	// Prometheus pair, an agent, someone's curl) need, and, at some
	// 100 KiB each at most (68 KiB of headers, TLS buffers, a goroutine),
	// under 7 MiB, a small share of the operator's memory limit. A client
	// that fills them holds each for seconds, not for ever: the timeouts
	// above end it, and a refusal closes its connection.
	metricsLimits = serverLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second,
		idle: 90 * time.Second, maxHeaderBytes: 64 << 10, maxConns: 64}
	// probeLimits are the same, without a cap: anyone on the pod network
	// could fill it, fail the kubelet's liveness probe and have the
	// operator restarted.
	probeLimits = func() serverLimits {
		l := metricsLimits
		l.maxConns = 0
		return l
	}()
)

// listen listens on addr, within limits' cap, and over TLS with tlsConfig.
// The cap counts TCP connections, before their handshake: a client that
// never finishes one holds a connection all the same.
func listen(addr string, limits serverLimits, tlsConfig *tls.Config) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if limits.maxConns > 0 {
		l = netutil.LimitListener(l, limits.maxConns)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	return l, nil
}

// newServer returns a server of handler within limits. A TLS server's errors
// go to logger at debug level, at most every 10 s: every port scan, TCP
// health check and plain-HTTP request is a failed handshake, which the
// server reports on its error log, and no client may fill the log.
func newServer(handler http.Handler, limits serverLimits, withTLS bool, logger klog.Logger) *http.Server {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.readHeader,
		ReadTimeout:       limits.read,
		WriteTimeout:      limits.write,
		IdleTimeout:       limits.idle,
		MaxHeaderBytes:    limits.maxHeaderBytes,
	}
	if withTLS {
		srv.ErrorLog = log.New(&debugWriter{logger: logger, sometimes: rate.Sometimes{Interval: 10 * time.Second}}, "", 0)
	}
	return srv
}

// serve starts the metrics and probe servers. They answer from the start, so
// that a standby replica reports ready and is scraped like the leader.
func (o *Operator) serve(ctx context.Context, le *elector) (servers, error) {
	var out servers
	start := func(addr string, handler http.Handler, served *string, tlsConfig *tls.Config, limits serverLimits) error {
		if addr == "" || addr == "0" {
			return nil
		}
		l, err := listen(addr, limits, tlsConfig)
		if err != nil {
			return err
		}
		o.servedMu.Lock()
		*served = l.Addr().String()
		o.servedMu.Unlock()
		srv := newServer(handler, limits, tlsConfig != nil, klog.FromContext(ctx).WithValues("address", addr))
		out = append(out, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "HTTP server stopped", "address", addr)
			}
		}()
		return nil
	}

	metrics := http.NewServeMux()
	var metricsHandler http.Handler = promhttp.HandlerFor(o.opts.Metrics, promhttp.HandlerOpts{})
	var metricsTLS *tls.Config
	if o.opts.MetricsSecure {
		var err error
		if metricsTLS, err = securemetrics.TLSConfig(o.opts.MetricsCertDir, klog.FromContext(ctx)); err != nil {
			return nil, fmt.Errorf("--metrics-cert-dir %q: %w", o.opts.MetricsCertDir, err)
		}
		metricsHandler = securemetrics.NewAuthorizer(securemetrics.Options{
			Client: o.reviews, Path: "/metrics", Logger: klog.FromContext(ctx).WithName("metrics"),
		}).Wrap(metricsHandler)
	}
	metrics.Handle("/metrics", metricsHandler)
	if err := start(o.opts.MetricsAddr, metrics, &o.servedMetrics, metricsTLS, metricsLimits); err != nil {
		return nil, err
	}
	if o.opts.MetricsSecure && o.opts.MetricsAddr != "" && o.opts.MetricsAddr != "0" {
		certificate := "self-signed, generated at start"
		if o.opts.MetricsCertDir != "" {
			certificate = o.opts.MetricsCertDir
		}
		klog.FromContext(ctx).Info("Serving /metrics over TLS to bearer tokens allowed to get it", "address", o.opts.MetricsAddr, "certificate", certificate)
	}

	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if le != nil {
			if err := le.health.Check(r); err != nil {
				http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !o.Ready() {
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if err := start(o.opts.ProbeAddr, probes, &o.servedProbes, nil, probeLimits); err != nil {
		out.shutdown()
		return nil, err
	}
	if err := o.serveWebhooks(ctx, start); err != nil {
		out.shutdown()
		return nil, err
	}
	return out, nil
}

// debugWriter writes the lines of a log.Logger at debug level, some of them.
type debugWriter struct {
	logger    klog.Logger
	sometimes rate.Sometimes
}

func (w *debugWriter) Write(p []byte) (int, error) {
	w.sometimes.Do(func() {
		w.logger.V(1).Info("HTTP server error", "error", strings.TrimSpace(string(p)))
	})
	return len(p), nil
}
