package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
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
	start := func(addr string, mux *http.ServeMux, served *string) error {
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
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		out = append(out, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "HTTP server stopped", "address", addr)
			}
		}()
		return nil
	}

	metrics := http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(o.opts.Metrics, promhttp.HandlerOpts{}))
	if err := start(o.opts.MetricsAddr, metrics, &o.servedMetrics); err != nil {
		return nil, err
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
	if err := start(o.opts.ProbeAddr, probes, &o.servedProbes); err != nil {
		out.shutdown()
		return nil, err
	}
	return out, nil
}
