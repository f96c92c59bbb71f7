package bed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneRealNodePerMachine: while one bed holds the real-node lock,
// another is refused with a message naming the holder; once it is
// released the next bed takes it.
func TestOneRealNodePerMachine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "real-node.lock")
	first, err := lockRealNode(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockRealNode(path)
	if err == nil {
		t.Fatal("a second real node was allowed while the first runs")
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "one suite with a real node at a time") {
		t.Errorf("refusal %q: want it to name the holder (%s) and what to do", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	next, err := lockRealNode(path)
	if err != nil {
		t.Fatalf("the lock was released, and still: %v", err)
	}
	_ = next.Close()
}
