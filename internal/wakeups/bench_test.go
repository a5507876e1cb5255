// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchMB is the size of the generated log: $VIDRA_WAKEUPS_BENCH_MB, 100 by
// default (seconds), 1024 for the figure docs/wakeups.md quotes.
func benchMB(b *testing.B) int {
	if s := os.Getenv("VIDRA_WAKEUPS_BENCH_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("VIDRA_WAKEUPS_BENCH_MB=%q: want a number of megabytes", s)
		}
		return n
	}
	return 100
}

// writeBenchLog writes about mb megabytes of audit lines as a busy cluster
// writes them: 200 controllers, each polling, renewing a Lease, watching
// and writing status over 2,000 objects, two stages per request (three for
// a watch), at 200 requests a second of log time. It returns the lines
// written.
func writeBenchLog(b *testing.B, path string, mb int) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var lines, size int64
	var line []byte
	for i := 0; size < int64(mb)<<20; i++ {
		ctrl := i % 200
		at := start.Add(time.Duration(i) * 5 * time.Millisecond).Format(time.RFC3339Nano)
		verb, res, group, sub, uri := "get", "configmaps", "", "", ""
		obj := fmt.Sprintf("obj-%d", (i/200)%2000)
		ns := fmt.Sprintf("ns-%d", ctrl%50)
		switch i % 10 {
		case 0, 1:
			verb, res, group = "update", "leases", "coordination.k8s.io"
			obj, ns = fmt.Sprintf("ctrl-%d", ctrl), "kube-system"
		case 2:
			verb, res, group, sub = "patch", "widgets", "example.com", "status"
		case 3:
			verb, obj = "watch", ""
		case 4:
			verb, obj = "list", ""
		}
		uri = "/api/v1/namespaces/" + ns + "/" + res
		if group != "" {
			uri = "/apis/" + group + "/v1/namespaces/" + ns + "/" + res
		}
		if obj != "" {
			uri += "/" + obj
		}
		if verb == "watch" {
			uri += "?allowWatchBookmarks=true&resourceVersion=12345&timeoutSeconds=420&watch=true"
		}
		if verb == "list" {
			uri += "?limit=500&resourceVersion=0"
		}
		// The API server's encoder escapes '&' as \u0026, as Go's
		// encoding/json does.
		uri = strings.ReplaceAll(uri, "&", `\u0026`)
		stages := []string{StageRequestReceived, StageResponseComplete}
		if verb == "watch" {
			stages = []string{StageRequestReceived, StageResponseStarted, StageResponseComplete}
		}
		for _, st := range stages {
			line = fmt.Appendf(line[:0], `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%08x-1c2d-4e5f-8a9b-%012x","stage":"%s","requestURI":"%s","verb":"%s","user":{"username":"system:serviceaccount:ns-%d:controller-%d","uid":"5e1f0c7a-3b2d-4c1e-9f8a-7d6c5b4a3f2e","groups":["system:serviceaccounts","system:serviceaccounts:ns-%d","system:authenticated"]},"sourceIPs":["10.0.0.%d"],"userAgent":"controller-%d/v1.2.3 (linux/amd64) kubernetes/abcdef0","objectRef":{"resource":"%s","namespace":"%s","name":"%s","apiGroup":"%s","apiVersion":"v1","subresource":"%s"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"%s","stageTimestamp":"%s","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding"}}`+"\n",
				i, i, st, uri, verb, ctrl%50, ctrl, ctrl%50, ctrl%250, ctrl, res, ns, obj, group, sub, at, at)
			_, _ = w.Write(line)
			size += int64(len(line))
			lines++
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return lines
}

var benchLog struct {
	once  sync.Once
	path  string
	lines int64
	size  int64
}

// BenchmarkReadAndAnalyse reads a generated audit log and reports its
// throughput (MB/s, events/s) and the peak of live heap, which must not
// grow with the log; with jq installed, also jq's rate at merely parsing
// the same file (jq empty), for comparison.
//
//	go test ./internal/wakeups/ -run '^$' -bench ReadAndAnalyse -benchtime 1x
//	VIDRA_WAKEUPS_BENCH_MB=1024 go test ./internal/wakeups/ -run '^$' -bench ReadAndAnalyse -benchtime 1x
func BenchmarkReadAndAnalyse(b *testing.B) {
	benchLog.once.Do(func() {
		dir, err := os.MkdirTemp("", "wakeups-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchLog.path = filepath.Join(dir, "audit.log")
		benchLog.lines = writeBenchLog(b, benchLog.path, benchMB(b))
		st, err := os.Stat(benchLog.path)
		if err != nil {
			b.Fatal(err)
		}
		benchLog.size = st.Size()
	})
	b.Cleanup(func() { os.RemoveAll(filepath.Dir(benchLog.path)) })
	b.SetBytes(benchLog.size)
	runtime.GC()
	peak := watchHeap()
	cpu0 := cpuTime()
	b.ResetTimer()
	var rep Report
	for range b.N {
		f, err := os.Open(benchLog.path)
		if err != nil {
			b.Fatal(err)
		}
		var rd Reader
		a := NewAnalyzer(Limits{}, time.Time{}, time.Time{})
		if err := rd.Read(f, a.Add); err != nil {
			b.Fatal(err)
		}
		f.Close()
		rep = a.Report(rd.Coverage())
	}
	b.StopTimer()
	cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
	heap := peak()
	secs := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(benchLog.lines)/secs, "events/s")
	b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MB")
	// On a shared machine the wall clock measures the neighbours too: the
	// rate per CPU second is the tool's own.
	b.ReportMetric(float64(benchLog.size)/(1<<20)/cpu, "MB/cpu-s")
	if rep.Coverage.Malformed != 0 || len(rep.Clients) != 200 {
		b.Fatalf("coverage %+v, %d clients", rep.Coverage, len(rep.Clients))
	}
	if jq, err := exec.LookPath("jq"); err == nil {
		t0 := time.Now()
		cmd := exec.Command(jq, "empty", benchLog.path)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("jq: %v\n%s", err, out)
		}
		mb := float64(benchLog.size) / (1 << 20)
		b.ReportMetric(mb/time.Since(t0).Seconds(), "jq-empty-MB/s")
		b.ReportMetric(mb/(cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime()).Seconds(), "jq-empty-MB/cpu-s")
	} else {
		b.Log("jq is not installed: no comparison")
	}
	b.Logf("%d MB, %d events, %d requests", benchLog.size>>20, benchLog.lines, rep.Coverage.Requests)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// watchHeap samples the live heap every 10 ms until the returned func is
// called, which returns the highest sample.
func watchHeap() func() uint64 {
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
