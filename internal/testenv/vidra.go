// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
)

// BuildVidra compiles cmd/vidra of the repository into path, with the race
// detector when race is set. End-to-end tests and the benchmark run the
// operator as a process of its own, so that a SIGKILL is real and its memory
// is its own.
func BuildVidra(ctx context.Context, path string, race bool) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/vidra")...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./cmd/vidra: %w\n%s", err, out)
	}
	return nil
}

// VidraProcess is one run of the vidra binary, with its /metrics and probes
// on loopback ports of its own and its log in a file.
type VidraProcess struct {
	// MetricsURL is the operator's /metrics endpoint, over plain HTTP.
	MetricsURL string
	// MetricsAddr is the host and port of /metrics, for a scraper of an
	// operator run with --metrics-secure, which answers over HTTPS only.
	MetricsAddr string
	// ProbeURL is the base URL of /healthz and /readyz.
	ProbeURL string
	// LogPath is the file that receives the operator's stdout and stderr.
	LogPath string

	proc *controlplane.Process
}

// VidraOptions configure StartVidra.
type VidraOptions struct {
	// Binary is the vidra executable (see BuildVidra).
	Binary string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// Namespace is passed as --namespace.
	Namespace string
	// LogPath receives the output; it is appended to, so that the runs of one
	// test after restarts read as one story.
	LogPath string
	// Args are further flags, e.g. --leader-elect or --log-level.
	Args []string
	// Env is added to the inherited environment, e.g. GOMEMLIMIT=64MiB.
	Env []string
}

// StartVidra starts the operator with free loopback ports for /metrics and
// the probes. The kernel kills it if the calling process dies.
func StartVidra(opts VidraOptions) (*VidraProcess, error) {
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	probePort, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + opts.Kubeconfig,
		"--namespace=" + opts.Namespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
	}, opts.Args...)
	proc, err := controlplane.StartProcess("vidra", opts.Binary, "", opts.LogPath, args, opts.Env)
	if err != nil {
		return nil, err
	}
	return &VidraProcess{
		MetricsURL:  fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort),
		ProbeURL:    fmt.Sprintf("http://127.0.0.1:%d", probePort),
		LogPath:     opts.LogPath,
		proc:        proc,
	}, nil
}

// PID is the operator's process ID.
func (p *VidraProcess) PID() int { return p.proc.PID() }

// Alive reports whether the process still runs.
func (p *VidraProcess) Alive() bool { return p.proc.Alive() }

// Signal sends sig to the process; signalling an exited process is no error.
func (p *VidraProcess) Signal(sig syscall.Signal) error {
	return p.proc.Signal(sig)
}

// Wait waits for the process to exit, up to timeout, and returns how it
// exited.
func (p *VidraProcess) Wait(timeout time.Duration) error {
	// An exited process answers even with a zero timeout.
	select {
	case <-p.proc.Exited():
		return p.proc.ExitErr()
	default:
	}
	select {
	case <-p.proc.Exited():
		return p.proc.ExitErr()
	case <-time.After(timeout):
		return fmt.Errorf("vidra (pid %d) still running after %s", p.PID(), timeout)
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after grace. It is safe to
// call on an exited process and from a cleanup.
func (p *VidraProcess) Stop(grace time.Duration) { p.proc.Stop(grace) }

// Kill sends SIGKILL and waits until the process is gone.
func (p *VidraProcess) Kill() { p.proc.Kill() }

// WaitReady polls /readyz until it answers 200, failing early when the
// process exits.
func (p *VidraProcess) WaitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("vidra exited: %v", p.proc.ExitErr())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ProbeURL+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("vidra (pid %d) not ready: %w; log tail:\n%s", p.PID(), err, p.proc.LogTail(20))
	}
	return nil
}

// Metrics scrapes the operator's /metrics.
func (p *VidraProcess) Metrics(ctx context.Context) (Metrics, error) {
	return ScrapeMetrics(ctx, p.MetricsURL)
}

// RSSBytes reads the resident set size (VmRSS) and its peak (VmHWM) of the
// process from /proc.
func (p *VidraProcess) RSSBytes() (rss, peak int64, err error) {
	return ProcessRSS(p.PID())
}

// ProcessRSS reads VmRSS and VmHWM of pid from /proc/<pid>/status, in bytes.
func ProcessRSS(pid int) (rss, peak int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, perr := strconv.ParseInt(fields[1], 10, 64)
		if perr != nil {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return rss, peak, nil
}
