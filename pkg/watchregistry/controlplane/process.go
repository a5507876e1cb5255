// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one child of the control plane. Its output goes to a log file in
// the Env's directory, whose tail is quoted when the process fails.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// startProcess starts a control-plane child in dir, logging to dir/name.log.
func startProcess(name, binary, dir string, args []string) (*process, error) {
	return startLogged(name, binary, dir, filepath.Join(dir, name+".log"), args, nil)
}

// startLogged starts binary with its output appended to logPath and env
// added to the inherited environment.
func startLogged(name, binary, dir, logPath string, args, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// Own process group so a stop reaches everything the child forks, and
	// Pdeathsig so the kernel kills the child if the test binary dies without
	// running its cleanup (a panic, a timeout, SIGKILL).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// errIfExited returns an error quoting the log tail once the process is gone.
func (p *process) errIfExited() error {
	if p.alive() {
		return nil
	}
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.waitErr, p.logTail(30))
}

func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop asks the process group to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	}
}

// kill ends the process group at once, as a crash would.
func (p *process) kill() {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.exited
}

// freePort finds a free loopback port for a child to listen on. Another
// process can take it before the child binds it; listensOn catches that
// case. The port comes from below the kernel's ephemeral range, which every
// outgoing connection (the control plane's, the tests' clients') takes its
// local port from: a port of that range, free when asked, was taken by a
// connection before the child bound it often enough to fail a run.
func freePort() (int, error) {
	if low, ok := ephemeralLow(); ok && low > 10000 {
		for range 64 {
			port := low - 1 - rand.IntN(low-10000)
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				l.Close()
				return port, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, false
	}
	low, err := strconv.Atoi(fields[0])
	return low, err == nil
}

// listensOn reports whether process pid holds a listening TCP socket on port.
// It matches the socket inodes of /proc/net/tcp{,6} against the process's file
// descriptors, which proves that a ready answer on that port came from our own
// child and not from a stranger that took the port first.
func listensOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return false, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A is TCP_LISTEN
				continue
			}
			local := fields[1]
			i := strings.LastIndexByte(local, ':')
			p, err := strconv.ParseUint(local[i+1:], 16, 32)
			if err != nil || int(p) != port {
				continue
			}
			inodes[fields[9]] = true
		}
		_ = f.Close()
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		if strings.HasPrefix(target, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			return true, nil
		}
	}
	return false, nil
}

// portFree reports whether nothing listens on the loopback port any more.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
