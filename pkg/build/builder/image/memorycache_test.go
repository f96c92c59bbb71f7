package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMemoryCacheDir makes a locked blob info cache directory in /dev/shm,
// removing the directories of killed builders (no lock held) and keeping
// those of open ones (locked).
func TestMemoryCacheDir(t *testing.T) {
	if _, err := os.Stat(memoryDir); err != nil {
		t.Fatalf("this machine has no %s: %v", memoryDir, err)
	}
	mk := func() string {
		dir, err := os.MkdirTemp(memoryDir, memoryCachePrefix+"test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "blob-info-cache-v1.sqlite"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	killed, open := mk(), mk()
	held, err := lockDir(open)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	dir, lock, err := memoryCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir); _ = lock.Close() })
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("the directory of a killed builder is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(open, "blob-info-cache-v1.sqlite")); err != nil {
		t.Errorf("the directory of an open builder was removed: %v", err)
	}
	if filepath.Dir(dir) != memoryDir || !strings.HasPrefix(filepath.Base(dir), memoryCachePrefix) {
		t.Errorf("made %s, want %s/%s...", dir, memoryDir, memoryCachePrefix)
	}
	if f, err := lockDir(dir); err == nil {
		_ = f.Close()
		t.Errorf("%s is not locked", dir)
	}
	other, otherLock, err := memoryCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(other)
	_ = otherLock.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("another builder's sweep removed the directory of an open one: %v", err)
	}
}
