package docker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckUserNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, uidMap string
		host         bool
	}{
		{"host", "         0          0 4294967295\n", true},
		{"pod user namespace", "         0    1048576      65536\n", false},
		{"rootless, two ranges", "0 1000 1\n1 100000 65536\n", false},
		{"identity of a part", "0 0 65536\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "uid_map")
			if err := os.WriteFile(path, []byte(tc.uidMap), 0o600); err != nil {
				t.Fatal(err)
			}
			err := CheckUserNamespace(path)
			if got := errors.Is(err, ErrHostUserNamespace); got != tc.host {
				t.Fatalf("CheckUserNamespace(%q) = %v, want host namespace %v", tc.uidMap, err, tc.host)
			}
		})
	}
	if err := CheckUserNamespace(filepath.Join(t.TempDir(), "missing")); err == nil || errors.Is(err, ErrHostUserNamespace) {
		t.Fatalf("a missing map gave %v, want a read error", err)
	}
}
