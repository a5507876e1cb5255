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

// Process is a child process of the test binary: a component of the control
// plane, or an operator a test runs as a process of its own (StartProcess).
// Its output goes to a log file, whose tail is quoted when it fails.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// startChild starts a control-plane child in dir, logging to dir/name.log.
func startChild(name, binary, dir string, args []string) (*Process, error) {
	return StartProcess(name, binary, dir, filepath.Join(dir, name+".log"), args, nil)
}

// StartProcess starts binary in dir (empty: the working directory) with its
// output appended to logPath and env added to the inherited environment. The
// kernel kills it if the test binary dies; Stop or Kill end it before.
func StartProcess(name, binary, dir, logPath string, args, env []string) (*Process, error) {
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
	p := &Process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed once the process has exited; ExitErr then says how.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is how the process exited (exec.Cmd.Wait's error), once Exited is
// closed; nil before.
func (p *Process) ExitErr() error {
	if p.Alive() {
		return nil
	}
	return p.waitErr
}

// Signal sends sig to the process; signalling an exited process is no error.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s (pid %d): %w", p.name, p.PID(), err)
	}
	return nil
}

// errIfExited returns an error quoting the log tail once the process is gone.
func (p *Process) errIfExited() error {
	if p.Alive() {
		return nil
	}
	return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.name, p.waitErr, p.LogTail(30))
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
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

// Stop asks the process group to terminate and kills it after grace. It is
// safe to call on an exited process and from a cleanup.
func (p *Process) Stop(grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.exited
	}
}

// Kill ends the process group at once, as a crash would, and waits until it
// is gone.
func (p *Process) Kill() {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.exited
}

// FreePort finds a free loopback port for a child to listen on. Another
// process can take it before the child binds it; listensOn catches that
// case. The port comes from below the kernel's ephemeral range, which every
// outgoing connection (the control plane's, the tests' clients') takes its
// local port from: a port of that range, free when asked, was taken by a
// connection before the child bound it often enough to fail a run.
func FreePort() (int, error) {
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
