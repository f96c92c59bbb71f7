package image

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStopTrees kills what a step runtime runs, the commands it started
// and theirs (which hold the step's output open), so that the runtime sees
// its step end; the process's other children go on running.
func TestStopTrees(t *testing.T) {
	step := exec.Command("sh", "-c", "sleep 3001 & sleep 3002 & wait")
	step.Args[0] = "fake-step"
	other := exec.Command("sleep", "3003")
	for _, c := range []*exec.Cmd{step, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = other.Process.Kill()
		_ = other.Wait()
	})
	isStep := func(pid int) bool { return argv0(pid) == "fake-step" }

	// Both background commands have started: the tree is whole.
	waitFor(t, "the step runtime's two commands to start", func() bool {
		tree, err := treesBelow(os.Getpid(), isStep)
		return err == nil && len(tree) == 2
	})

	n, err := stopTrees(os.Getpid(), isStep)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("killed %d processes, want 2 (the two sleeps)", n)
	}
	// The runtime sees its commands end, and ends.
	if err := step.Wait(); err != nil {
		t.Errorf("the step runtime ended with %v, want its own end", err)
	}
	waitFor(t, "the step's background commands to end", func() bool {
		return len(running("sleep\x003001")) == 0 && len(running("sleep\x003002")) == 0
	})
	if len(running("sleep\x003003")) != 1 {
		t.Errorf("the process's other child was stopped too")
	}
}

// running returns the live (not zombie) processes whose command line
// starts with cmdline (NUL-separated arguments).
func running(cmdline string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(raw), cmdline) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		if fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(fields) > 0 && fields[0] == "Z" {
			continue
		}
		out = append(out, pid)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
