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

// serve starts the metrics and probe servers. They answer from the start, so
// that a standby replica reports ready and is scraped like the leader.
func (o *Operator) serve(ctx context.Context, le *elector) (servers, error) {
	var out servers
	start := func(addr string, mux *http.ServeMux, served *string, tlsConfig *tls.Config) error {
		if addr == "" || addr == "0" {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		o.servedMu.Lock()
		*served = l.Addr().String()
		o.servedMu.Unlock()
		// ReadHeaderTimeout bounds the TLS handshake too.
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if tlsConfig != nil {
			l = tls.NewListener(l, tlsConfig)
			// A bearer token is a few KiB at most; the default of 1 MiB
			// of headers is room for nothing but abuse.
			srv.MaxHeaderBytes = 64 << 10
			// Every port scan, TCP health check and plain-HTTP request
			// is a failed handshake, which the server reports on its
			// error log: at debug level, so that no client fills the log.
			srv.ErrorLog = log.New(debugWriter{klog.FromContext(ctx).WithValues("address", addr)}, "", 0)
		}
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
	if err := start(o.opts.MetricsAddr, metrics, &o.servedMetrics, metricsTLS); err != nil {
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
	if err := start(o.opts.ProbeAddr, probes, &o.servedProbes, nil); err != nil {
		out.shutdown()
		return nil, err
	}
	return out, nil
}

// debugWriter writes the lines of a log.Logger at debug level.
type debugWriter struct{ logger klog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.logger.V(1).Info("HTTP server error", "error", strings.TrimSpace(string(p)))
	return len(p), nil
}
