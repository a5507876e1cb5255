// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"os"
	"syscall"
	"testing"
)

var env *Env

func TestMain(m *testing.M) { RunMainShort(m, &env, Options{}) }

// TestStopLeavesNothingBehind starts a second control plane so that the
// package's shared one keeps serving the other tests.
func TestStopLeavesNothingBehind(t *testing.T) {
	Need(t, env)
	e, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pids, ports, dir := e.PIDs(), e.Ports(), e.Dir
	if len(pids) != 3 {
		t.Fatalf("pids = %v, want etcd, kube-apiserver and kube-controller-manager", pids)
	}
	if err := e.Healthy(); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	e.Stop() // idempotent
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	for _, port := range ports {
		if !portFree(port) {
			t.Errorf("port %d still in use after Stop", port)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still exists after Stop (stat: %v)", dir, err)
	}
}

func TestListensOnDetectsForeignPort(t *testing.T) {
	Need(t, env)
	port := env.Ports()[0] // etcd's client port
	if ok, err := listensOn(env.PIDs()["etcd"], port); err != nil || !ok {
		t.Fatalf("listensOn(etcd, %d) = %v, %v; want true", port, ok, err)
	}
	if ok, err := listensOn(os.Getpid(), port); err != nil || ok {
		t.Fatalf("listensOn(self, %d) = %v, %v; want false", port, ok, err)
	}
}
