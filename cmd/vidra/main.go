// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command vidra runs the Vidra operator: it keeps the manifests of every
// VidraResource applied, corrects drift on events and on an interval, and
// cleans up through a finalizer. See the README for flags and configuration.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

type flags struct {
	kubeconfig            string
	namespace             string
	configMap             string
	watchNamespace        string
	defaultServiceAccount string
	trustedNamespaces     string
	crossNamespaceDeps    bool
	allowHTTP             bool
	cidrDeny              string
	workers               int
	reconcileTimeout      time.Duration
	slowAnswer            time.Duration
	qps                   float64
	burst                 int
	logLevel              string
	logFormat             string
	linger                time.Duration
	informers             watchregistry.InformerBudget
	metricsAddr           string
	metricsSecure         bool
	metricsCertDir        string
	webhookAddr           string
	webhookCertDir        string
	probeAddr             string
	memoryLimit           string
	leaderElect           bool
	leaseName             string
	leaseDuration         time.Duration
	renewDeadline         time.Duration
	retryPeriod           time.Duration
	pprofAddr             string
	sharding              bool
	shardIdentity         string
	shardLease            time.Duration
	shardRenew            time.Duration
	shardSelector         string
	cacheObjects          int64
	cacheSize             string
	namespaceCacheSize    string
}

func main() {
	var f flags
	fs := flag.NewFlagSet("vidra", flag.ExitOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster configuration (env KUBECONFIG)")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "vidra-system"), "the operator's own namespace, home of its ConfigMap (env POD_NAMESPACE)")
	fs.StringVar(&f.configMap, "config-map", operator.DefaultConfigMapName, "name of the configuration ConfigMap in --namespace")
	fs.StringVar(&f.watchNamespace, "watch-namespace", os.Getenv("WATCH_NAMESPACE"), "reconcile VidraResources of this namespace only; empty means all (env WATCH_NAMESPACE)")
	fs.StringVar(&f.defaultServiceAccount, "default-service-account", "", "ServiceAccount (of each VidraResource's namespace) to impersonate when a resource names none")
	fs.BoolVar(&f.crossNamespaceDeps, "allow-cross-namespace-dependencies", false, "let spec.dependsOn name VidraResources of other namespaces; off, a tenant can depend on (and so learn the readiness of) resources of its own namespace only")
	fs.StringVar(&f.trustedNamespaces, "trusted-namespaces", "", "comma-separated namespaces whose VidraResources may act with the operator's own identity when they name no ServiceAccount; empty means --namespace alone, * every namespace (a single-tenant cluster). Elsewhere a resource without spec.serviceAccountName or --default-service-account applies nothing")
	fs.BoolVar(&f.allowHTTP, "allow-http-destinations", false, "accept remote destinations whose server is plain http:// (credentials and manifests in clear text)")
	fs.StringVar(&f.cidrDeny, "destination-cidr-deny", "169.254.0.0/16,fe80::/10", "comma-separated CIDRs remote destinations may not connect to, checked on the resolved address; the default keeps out link-local (cloud metadata) addresses; empty denies nothing")
	fs.IntVar(&f.workers, "workers", operator.DefaultWorkers, "VidraResources reconciled in parallel")
	fs.DurationVar(&f.reconcileTimeout, "reconcile-timeout", operator.DefaultReconcileTimeout, "how long one reconcile may work on its destination; past it the reconcile stops, reports what it did and is retried with backoff, so that no resource holds a worker longer (negative: no limit)")
	fs.Int64Var(&f.cacheObjects, "destination-cache-objects", destination.DefaultCacheObjects, "the most objects with Vidra's marks that no resource deploying there declares (held as stubs) Vidra caches from the remote clusters of one namespace together; past it, it stops watching the cluster that went over for 30s (doubling up to 5m), and that cluster's resources report it")
	fs.StringVar(&f.cacheSize, "destination-cache-size", "32Mi", "the most memory the stubs cached from the remote clusters of one namespace take together (see --destination-cache-objects), as a quantity such as 64Mi; past it, as --destination-cache-objects")
	fs.StringVar(&f.namespaceCacheSize, "namespace-cache-size", "64Mi", "the most memory the objects Vidra caches for the resources of one namespace take, on every cluster they deploy to, as a quantity such as 64Mi; past it, their objects are read from the API server instead and the namespace's resources say so (condition CacheLimited); other namespaces are untouched")
	fs.DurationVar(&f.slowAnswer, "destination-slow-answer", destination.DefaultSlowAnswer, "how long a remote destination's API server may take to answer a request before Vidra treats it as unavailable for 30s")
	// Converging 1,000 resources takes about 400 requests a second on two
	// cores; a lower client-side limit, not the API server, set the pace in
	// the bench. The API server's priority and fairness protects it.
	fs.Float64Var(&f.qps, "kube-api-qps", 1000, "client-side rate limit of requests to the API server, per second, per client")
	fs.IntVar(&f.burst, "kube-api-burst", 2000, "client-side burst of requests to the API server")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error; a number N logs klog verbosity N")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or console")
	fs.DurationVar(&f.linger, "informer-linger", watchregistry.DefaultLinger, "how long an informer no resource needs keeps running before it stops")
	fs.IntVar(&f.informers.PerTenant, "max-informers-per-namespace", controller.DefaultInformerBudget.PerTenant, "the most kinds the VidraResources of one namespace have Vidra watch (one informer per kind and cluster, each namespace charged for every one it needs, shared or not); past it a resource fails with TooManyKinds")
	fs.IntVar(&f.informers.PerCluster, "max-informers-per-cluster", controller.DefaultInformerBudget.PerCluster, "the most informers (kinds watched) Vidra runs for one destination cluster; past it a resource that needs another fails with TooManyKinds")
	fs.IntVar(&f.informers.Total, "max-informers", controller.DefaultInformerBudget.Total, "the most informers (kinds watched, on every cluster) Vidra runs in all; past it a resource that needs another fails with TooManyKinds")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", false, "serve /metrics over TLS, only to requests with a bearer token whose identity may get the non-resource URL /metrics (checked with a TokenReview and a SubjectAccessReview); the install turns it on")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key for --metrics-secure (e.g. a cert-manager Secret), read again when they change; empty means a self-signed certificate generated at start")
	fs.StringVar(&f.webhookAddr, "webhook-bind-address", "", "address of the receiver of Infrahub's artifact webhooks (TLS), at /hooks/infrahub/{namespace}/{name}; empty or 0 turns it off (docs/infrahub.md); the install turns it on")
	fs.StringVar(&f.webhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key for --webhook-bind-address, read again when they change; empty means a self-signed certificate generated at start")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns them off")
	// 48Mi: the cache of 4,000 objects leaves a live heap near 20 MiB, and a
	// higher floor only lets garbage pile up before the collector runs
	// (make bench: RSS 72–77 MiB with 64Mi, 69 MiB with 48Mi, same CPU).
	fs.StringVar(&f.memoryLimit, "memory-limit", "auto", "the Go runtime's soft memory limit: auto (90% of the container's memory limit, none without one), off, or a quantity such as 200Mi; below it the collector paces itself by default (GOGC), and GOMEMLIMIT in the environment overrides it")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect one replica through a coordination.k8s.io Lease; only the leader reconciles")
	fs.StringVar(&f.leaseName, "leader-elect-lease-name", "vidra-leader", "name of the Lease, in --namespace")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lease is valid without renewal; standbys wait this long for a crashed leader")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	fs.BoolVar(&f.sharding, "sharding", false, "divide the VidraResources between all replicas that run with this flag, through a Lease per replica in --namespace (docs/scaling.md); excludes --leader-elect")
	fs.StringVar(&f.shardIdentity, "shard-identity", os.Getenv("POD_NAME"), "this replica's name among the members; empty means the host name and a random suffix (env POD_NAME)")
	fs.DurationVar(&f.shardLease, "shard-lease-duration", shard.DefaultLeaseDuration, "how long after its last renewal a member counts as gone, and its resources go to the others")
	fs.DurationVar(&f.shardRenew, "shard-renew-period", shard.DefaultRenewPeriod, "how often a member renews its Lease")
	fs.StringVar(&f.shardSelector, "shard-selector", "", "a label selector on VidraResources: this replica sees and reconciles only those it selects (static sharding, e.g. shard=a)")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints, for profiling a running operator; empty turns them off")
	_ = fs.Parse(os.Args[1:])

	logger, err := newLogger(f.logLevel, f.logFormat, "stderr")
	if err != nil {
		fmt.Fprintln(os.Stderr, "vidra:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, logger)
	if f.pprofAddr != "" {
		stopPprof, err := servePprof(f.pprofAddr)
		if err != nil {
			logger.Error(err, "Serving /debug/pprof failed")
			os.Exit(1)
		}
		defer stopPprof()
	}
	if err := run(ctx, f); err != nil {
		logger.Error(err, "Vidra stopped")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	limit, source, err := operator.MemoryLimit(f.memoryLimit, func(s string) (int64, error) {
		q, err := resource.ParseQuantity(s)
		return q.Value(), err
	}, "/sys/fs/cgroup")
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Memory limit", "bytes", limit, "source", source)
	deny, err := destination.ParseCIDRs(f.cidrDeny)
	if err != nil {
		return fmt.Errorf("--destination-cidr-deny: %w", err)
	}
	cacheSize, err := resource.ParseQuantity(f.cacheSize)
	if err != nil || cacheSize.Value() <= 0 || f.cacheObjects <= 0 {
		return fmt.Errorf("--destination-cache-objects %d, --destination-cache-size %q: both must be positive (a size is a quantity such as 64Mi)", f.cacheObjects, f.cacheSize)
	}
	nsCacheSize, err := resource.ParseQuantity(f.namespaceCacheSize)
	if err != nil || nsCacheSize.Value() <= 0 {
		return fmt.Errorf("--namespace-cache-size %q: must be a positive quantity such as 64Mi", f.namespaceCacheSize)
	}
	if f.informers.PerTenant <= 0 || f.informers.PerCluster <= 0 || f.informers.Total <= 0 {
		return fmt.Errorf("--max-informers-per-namespace %d, --max-informers-per-cluster %d, --max-informers %d: each must be positive",
			f.informers.PerTenant, f.informers.PerCluster, f.informers.Total)
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	// Not "vidra": client-go names writes without a field manager after the
	// user agent, and only Vidra's applies may carry that manager name.
	cfg.UserAgent = "vidra-operator"
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(
		// The collector's share of CPU (go_cpu_classes_gc_total_cpu_seconds_total
		// against go_cpu_classes_total_cpu_seconds_total) is what a memory
		// policy costs; make bench reports it.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|total):`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	local, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return fmt.Errorf("read the API server's URL %q: %w", cfg.Host, err)
	}
	operator.RegisterClientMetrics(metrics, local.Host)
	op, err := operator.New(ctx, operator.Options{
		Metrics:        metrics,
		MetricsAddr:    f.metricsAddr,
		MetricsSecure:  f.metricsSecure,
		MetricsCertDir: f.metricsCertDir,
		WebhookAddr:    f.webhookAddr,
		WebhookCertDir: f.webhookCertDir,
		ProbeAddr:      f.probeAddr,
		LeaderElection: operator.LeaderElection{
			Enabled:       f.leaderElect,
			Name:          f.leaseName,
			LeaseDuration: f.leaseDuration,
			RenewDeadline: f.renewDeadline,
			RetryPeriod:   f.retryPeriod,
		},
		Sharding: operator.Sharding{
			Enabled:       f.sharding,
			Identity:      f.shardIdentity,
			LeaseDuration: f.shardLease,
			RenewPeriod:   f.shardRenew,
		},
		ShardSelector:                   f.shardSelector,
		Config:                          cfg,
		Namespace:                       f.namespace,
		ConfigMapName:                   f.configMap,
		WatchNamespace:                  f.watchNamespace,
		DefaultServiceAccount:           f.defaultServiceAccount,
		TrustedNamespaces:               splitList(f.trustedNamespaces),
		AllowCrossNamespaceDependencies: f.crossNamespaceDeps,
		RemoteGuard: destination.Guard{AllowHTTP: f.allowHTTP, DenyCIDRs: deny, SlowAnswer: f.slowAnswer,
			CacheObjects: f.cacheObjects, CacheBytes: cacheSize.Value()},
		NamespaceCacheBytes: nsCacheSize.Value(),
		Workers:             f.workers,
		ReconcileTimeout:    f.reconcileTimeout,
		Linger:              f.linger,
		Informers:           f.informers,
	})
	if err != nil {
		return err
	}
	return op.Run(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// newLogger builds the zap logger and routes klog, and so client-go's own
// logs, into it, so that one process writes one format.
func newLogger(level, format, output string) (klog.Logger, error) {
	var lvl zapcore.Level
	var verbosity int
	if _, err := fmt.Sscanf(level, "%d", &verbosity); err == nil {
		lvl = zapcore.Level(-verbosity)
	} else if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return klog.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn, error or a number", level)
	}
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return klog.Logger{}, fmt.Errorf("--log-format %q: want json or console", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{output}, []string{output}
	// A stack trace belongs to a panic; an error a reconcile reports is one
	// line with its object and cause.
	cfg.DisableStacktrace = true
	zl, err := cfg.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return warningCore{c} }))
	if err != nil {
		return klog.Logger{}, err
	}
	logger := zapr.NewLogger(zl)
	klog.SetLogger(logger)
	return logger, nil
}

// warningCore writes an info entry that carries "severity": "warning" at
// zap's warn level, without that field. logr, and so klog's structured
// calls, know only info and error; a problem the operator works around (a
// bad configuration value it ignores) is neither.
type warningCore struct{ zapcore.Core }

func (c warningCore) With(fields []zapcore.Field) zapcore.Core {
	return warningCore{c.Core.With(fields)}
}

func (c warningCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c warningCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if e.Level == zapcore.InfoLevel {
		for i, f := range fields {
			if f.Key == "severity" && f.Type == zapcore.StringType && f.String == "warning" {
				e.Level = zapcore.WarnLevel
				fields = append(fields[:i:i], fields[i+1:]...)
				break
			}
		}
	}
	return c.Core.Write(e, fields)
}

// servePprof serves the profiles on a mux of their own: net/http/pprof's
// handlers are never registered on the default mux, so /metrics and the
// probes cannot expose them by accident.
func servePprof(addr string) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --pprof-bind-address %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return func() { _ = srv.Close() }, nil
}

// splitList splits a comma-separated flag value, dropping empty items; nil
// when there are none, so that the default applies.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
