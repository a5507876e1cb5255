// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options tune a control plane. The zero value is a sensible default.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Empty
	// means $VIDRA_CONTROLPLANE_DIR.
	BinDir string
	// ExtraAPIServerArgs are appended to kube-apiserver's flags, for tests that
	// need an audit log or a feature gate.
	ExtraAPIServerArgs []string
	// StartTimeout bounds Start; zero means two minutes.
	StartTimeout time.Duration
	// Name prefixes the Env's temporary directory, its etcd prefix and the
	// common names of its CA and admin certificates ("<Name>-ca",
	// "<Name>-admin"), so that one harness's leftovers and audit entries are
	// told apart from another's. Empty means DefaultName.
	Name string
}

// DefaultName is the Name of an Env whose Options give none.
const DefaultName = "watchregistry-controlplane"

// Env is one running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Dir is the Env's private directory: data, credentials and process logs.
	Dir string

	binDir        string
	creds         *credentials
	etcdPort      int
	apiPort       int
	apiServerArgs []string

	mu        sync.Mutex
	processes map[string]*Process
	stopOnce  sync.Once
}

// DirEnv names the environment variable that holds the directory of the
// control plane's binaries when Options.BinDir is empty.
const DirEnv = "VIDRA_CONTROLPLANE_DIR"

// Start starts etcd, kube-apiserver and kube-controller-manager and returns
// once the API server is ready and the default namespace exists. On error
// everything already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	removeStaleDirs(name + "-")
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s-%d-", name, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("create control plane directory: %w", err)
	}
	env := &Env{Dir: dir, binDir: binDir, processes: map[string]*Process{}}
	defer func() {
		if err != nil {
			env.Stop()
		}
	}()

	if env.creds, err = generateCredentials(dir, name); err != nil {
		return nil, err
	}
	if err := env.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := env.startAPIServer(ctx, name, opts.ExtraAPIServerArgs); err != nil {
		return nil, err
	}
	if err := env.startControllerManager(); err != nil {
		return nil, err
	}
	return env, nil
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(DirEnv)
	}
	if dir == "" {
		return "", fmt.Errorf("no control plane binaries: set %s to a directory holding etcd, kube-apiserver and kube-controller-manager", DirEnv)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control plane binary %s not found in %s: %w", b, dir, err)
		}
	}
	return dir, nil
}

// removeStaleDirs deletes directories left behind by test binaries that died
// before their cleanup ran; the PID in the name tells whether the owner lives.
func removeStaleDirs(dirPrefix string) {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), dirPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(m)
		}
	}
}

func (e *Env) add(p *Process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.processes[p.name] = p
}

func (e *Env) proc(name string) *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.processes[name]
}

// waitReady polls check until it succeeds, failing early when the process
// exits and at the end proving that the port belongs to the process.
func waitReady(ctx context.Context, p *Process, port int, check func(context.Context) error) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := p.errIfExited(); err != nil {
			return false, err
		}
		if lastErr = check(ctx); lastErr != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil && p.Alive() {
			return fmt.Errorf("%s not ready: %w (last check: %v); last log lines:\n%s", p.name, err, lastErr, p.LogTail(30))
		}
		return err
	}
	ok, err := listensOn(p.PID(), port)
	if err != nil {
		return fmt.Errorf("check that %s owns port %d: %w", p.name, port, err)
	}
	if !ok {
		return fmt.Errorf("port %d answers but is not held by our %s (pid %d); another process took it", port, p.name, p.PID())
	}
	return nil
}

func (e *Env) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	e.etcdPort = clientPort
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := startChild("etcd", filepath.Join(e.binDir, "etcd"), e.Dir, []string{
		"--name=testenv",
		"--data-dir=" + filepath.Join(e.Dir, "etcd-data"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		// Durability is pointless for a throwaway store, and fsync dominates
		// write latency on shared disks.
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	e.add(p)
	client := &http.Client{Timeout: 2 * time.Second}
	return waitReady(ctx, p, clientPort, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	})
}

func (e *Env) startAPIServer(ctx context.Context, name string, extra []string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	e.apiPort = port
	prefix := make([]byte, 6)
	_, _ = rand.Read(prefix)
	e.apiServerArgs = append([]string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", e.etcdPort),
		// A private prefix per run keeps runs apart even on a shared etcd.
		"--etcd-prefix=/" + name + "-" + hex.EncodeToString(prefix),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// There is no kubelet or node network: the kubernetes Service needs no
		// endpoints, and the reconciler refuses a loopback address anyway.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(e.Dir, "apiserver-certs"),
		"--tls-cert-file=" + e.creds.servingCert,
		"--tls-private-key-file=" + e.creds.servingKey,
		"--client-ca-file=" + e.creds.caFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + e.creds.saPublicKey,
		"--service-account-signing-key-file=" + e.creds.saPrivateKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	}, extra...)
	e.Config = &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", port),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   e.creds.caCertPEM,
			CertData: e.creds.adminCertPEM,
			KeyData:  e.creds.adminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	return e.runAPIServer(ctx)
}

func (e *Env) runAPIServer(ctx context.Context) error {
	p, err := startChild("kube-apiserver", filepath.Join(e.binDir, "kube-apiserver"), e.Dir, e.apiServerArgs)
	if err != nil {
		return err
	}
	e.add(p)
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("client for kube-apiserver: %w", err)
	}
	return waitReady(ctx, p, e.apiPort, func(ctx context.Context) error {
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("/readyz: %w", err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("default namespace: %w", err)
		}
		return nil
	})
}

func (e *Env) startControllerManager() error {
	kubeconfig := filepath.Join(e.Dir, "kube-controller-manager.kubeconfig")
	if err := e.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	p, err := startChild("kube-controller-manager", filepath.Join(e.binDir, "kube-controller-manager"), e.Dir, []string{
		"--kubeconfig=" + kubeconfig,
		// The aggregation controller fills the built-in edit, admin and
		// view ClusterRoles, which tenants are usually bound to.
		"--controllers=garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller",
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
	})
	if err != nil {
		return err
	}
	e.add(p)
	// It serves nothing to probe (--secure-port=0); a bad flag or kubeconfig
	// makes it exit at once, which the next health check reports.
	return nil
}

// Kubectl returns the path of the kubectl built with the control plane.
func (e *Env) Kubectl() string { return filepath.Join(e.binDir, "kubectl") }

// Kubeconfig returns an admin kubeconfig for this control plane.
func (e *Env) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.creds.caCertPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.creds.adminCertPEM, ClientKeyData: e.creds.adminKeyPEM}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	cfg.CurrentContext = "testenv"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return data, nil
}

// WriteKubeconfig writes the admin kubeconfig to path with owner-only access.
func (e *Env) WriteKubeconfig(path string) error {
	data, err := e.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// Healthy reports an error when any process of the control plane has exited.
func (e *Env) Healthy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, p := range e.processes {
		errs = append(errs, p.errIfExited())
	}
	return errors.Join(errs...)
}

// PIDs returns the process IDs of the control plane, by process name.
func (e *Env) PIDs() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	pids := map[string]int{}
	for name, p := range e.processes {
		pids[name] = p.PID()
	}
	return pids
}

// Ports returns the loopback ports the control plane listens on.
func (e *Env) Ports() []int { return []int{e.etcdPort, e.apiPort} }

// StopAPIServer kills kube-apiserver, as a crash or an upgrade would; etcd and
// the stored state stay. StartAPIServer brings it back on the same address.
func (e *Env) StopAPIServer() {
	if p := e.proc("kube-apiserver"); p != nil {
		p.Kill()
	}
}

// StartAPIServer restarts kube-apiserver after StopAPIServer and waits for it.
func (e *Env) StartAPIServer(ctx context.Context) error {
	if p := e.proc("kube-apiserver"); p != nil && p.Alive() {
		return errors.New("kube-apiserver is running")
	}
	return e.runAPIServer(ctx)
}

// Stop ends every process of the control plane and removes its directory.
// It is safe to call more than once and from a deferred cleanup.
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		// Reverse dependency order, so the API server does not spend its
		// grace period retrying a vanished etcd.
		for _, name := range []string{"kube-controller-manager", "kube-apiserver", "etcd"} {
			if p := e.proc(name); p != nil {
				p.Stop(10 * time.Second)
			}
		}
		if e.Dir != "" {
			_ = os.RemoveAll(e.Dir)
		}
	})
}
