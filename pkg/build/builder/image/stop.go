package image

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// stepRuntimes are the names buildah re-executes the program under to run
// one RUN step, with chroot isolation and with OCI isolation (which starts
// the OCI runtime and adopts the step's processes); the step's commands
// are their descendants.
var stepRuntimes = []string{"buildah-chroot-runtime", "buildah-oci-runtime"}

// StopRunSteps kills the RUN steps of every build running in this
// process: every process below each of this process's step runtimes (what
// buildah re-executes the program as to run a step). The runtimes
// themselves are left to see their step end, report it failed and clean up
// after it (an OCI runtime's container state). Builds whose step is killed
// fail. Other children of the process are left alone.
//
// buildah does not stop a running step when the build's context is
// cancelled (the runtime runs the step to its end, and a step's own
// children keep its output pipe open), so a program that stops its builds
// early, as `builder build` does when a platform that may not fail fails,
// cancels their contexts and calls StopRunSteps until they have returned: a
// build between steps starts its next step before it notices.
//
// The processes are stopped (SIGSTOP) before any is killed, so that none
// forks, nor is reparented out of the tree, meanwhile. It returns how many
// processes it killed.
func StopRunSteps() (int, error) {
	return stopTrees(os.Getpid(), func(pid int) bool { return slices.Contains(stepRuntimes, argv0(pid)) })
}

// stopTrees freezes the descendants of every child of pid that root
// accepts, then kills them all.
func stopTrees(pid int, root func(pid int) bool) (int, error) {
	stopped := map[int]bool{}
	// A process may fork before it is stopped: look again until no new
	// process shows up. Each round stops what it found, so the trees can
	// only grow below processes not stopped yet.
	for range 100 {
		found, err := treesBelow(pid, root)
		if err != nil {
			return 0, err
		}
		fresh := 0
		for _, p := range found {
			if !stopped[p] {
				stopped[p] = true
				fresh++
				_ = syscall.Kill(p, syscall.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for p := range stopped {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return len(stopped), nil
}

// treesBelow returns the descendants of the children of pid that root
// accepts, from the parent links in /proc.
func treesBelow(pid int, root func(pid int) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, err := parentOf(p)
		if err != nil {
			continue // it ended meanwhile
		}
		children[ppid] = append(children[ppid], p)
	}
	var out, queue []int
	for _, c := range children[pid] {
		if root(c) {
			queue = append(queue, children[c]...)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out, nil
}

// parentOf reads a process's parent from /proc/<pid>/stat, whose second
// field, the command name in parentheses, may hold spaces and parentheses.
func parentOf(pid int) (int, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, errors.New("malformed /proc stat")
	}
	return strconv.Atoi(fields[1])
}

// argv0 returns a process's first argument, or "" when it cannot be read.
func argv0(pid int) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	first, _, _ := bytes.Cut(raw, []byte{0})
	return string(first)
}
