// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// ContainerLimitShare is the part of the container's memory limit that
// MemoryLimit gives the Go runtime as its soft limit: the rest is room for
// what the runtime does not count (the pages of the mapped binary) and for
// the heap's growth while a collection runs.
const ContainerLimitShare = 0.9

// MemoryLimit chooses the Go runtime's soft memory limit
// (debug.SetMemoryLimit) and returns it, 0 for none, with where it came
// from.
//
// The policy is the collector's default pacing (GOGC=100), bounded by the
// container's memory limit when there is one: the runtime collects as
// rarely as its heap allows, and collects harder only when the process
// nears the limit the kubelet would kill it at. An earlier policy kept the
// limit at 1.25 times the live heap to keep RSS low; it did, but at 3,000
// resources the collector then ran almost without pause (60 % of the
// operator's CPU, taken from the API server on a small node), so cost per
// resource grew with size. Memory is cheaper than that CPU.
//
// want is --memory-limit: "auto" (the default) takes ContainerLimitShare of
// the cgroup's memory limit, or none when the container has no limit;
// "off" sets none; a byte count sets that. A GOMEMLIMIT in the environment
// wins over all of them, as the runtime applies it itself. cgroupRoot is
// where the cgroup file system is mounted ("/sys/fs/cgroup").
func MemoryLimit(want string, parse func(string) (int64, error), cgroupRoot string) (limit int64, source string, err error) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT", nil
	}
	switch want {
	case "off", "0":
		return 0, "none", nil
	case "auto", "":
		container, err := containerMemoryLimit(cgroupRoot)
		if err != nil || container <= 0 {
			return 0, "none (the container has no memory limit)", err
		}
		limit = int64(float64(container) * ContainerLimitShare)
		source = fmt.Sprintf("%.0f%% of the container's limit of %d bytes", ContainerLimitShare*100, container)
	default:
		if limit, err = parse(want); err != nil || limit <= 0 {
			return 0, "", fmt.Errorf("--memory-limit %q: want auto, off or a quantity such as 200Mi", want)
		}
		source = "--memory-limit"
	}
	debug.SetMemoryLimit(limit)
	return limit, source, nil
}

// containerMemoryLimit reads the memory limit of the process's cgroup:
// memory.max (cgroup v2) or memory.limit_in_bytes (v1), 0 when there is
// none. It reads the process's own cgroups from /proc/self/cgroup, under
// root, and falls back to the roots of the hierarchies (what a container
// sees with a private cgroup namespace).
func containerMemoryLimit(root string) (int64, error) {
	var dirs []string
	v2, v1, _ := ownCgroups()
	if v2 != "" {
		dirs = append(dirs, filepath.Join(root, v2))
	}
	if v1 != "" {
		dirs = append(dirs, filepath.Join(root, "memory", v1))
	}
	dirs = append(dirs, root, filepath.Join(root, "memory"))
	for _, dir := range dirs {
		for _, name := range []string{"memory.max", "memory.limit_in_bytes"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, err
			}
			return parseCgroupLimit(string(b))
		}
	}
	return 0, nil
}

// parseCgroupLimit reads a memory.max or memory.limit_in_bytes value: "max"
// and the v1 "no limit" value (close to MaxInt64, rounded to pages) are no
// limit.
func parseCgroupLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" || s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup memory limit %q: %w", s, err)
	}
	if n <= 0 || n >= math.MaxInt64/2 {
		return 0, nil
	}
	return n, nil
}

// ownCgroups returns the process's cgroup v2 path ("0::/path") and its
// cgroup v1 memory controller's path ("N:memory:/path"), each "" when
// there is none.
func ownCgroups() (v2, v1 string, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, rest, _ := strings.Cut(sc.Text(), ":")
		controllers, path, _ := strings.Cut(rest, ":")
		switch {
		case controllers == "" && path != "/":
			v2 = path
		case slices.Contains(strings.Split(controllers, ","), "memory") && path != "/":
			v1 = path
		}
	}
	return v2, v1, sc.Err()
}
