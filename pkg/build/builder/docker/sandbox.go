package docker

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// uidMapPath is the file CheckUserNamespace reads (a variable for tests).
var uidMapPath = "/proc/self/uid_map"

// ErrHostUserNamespace is CheckUserNamespace's error: the process runs in
// the host's user namespace.
var ErrHostUserNamespace = errors.New("this build pod runs in the node's user namespace (/proc/self/uid_map is the identity " +
	"map 0 0 4294967295): the node's container runtime ignored hostUsers: false, so the pod's root and its " +
	"SYS_ADMIN capability would be the node's. Unprivileged builds need nodes whose runtime gives pods user " +
	"namespaces: kubelet 1.30 or later with containerd 2.0 or later or CRI-O 1.25 or later, and runc 1.2 or " +
	"crun 1.9 or later (containerd 1.6 and 1.7 ignore the field). Run builds on such nodes (build.nodeSelector), " +
	"or, knowing what it grants, set build.podSecurity: Privileged")

// CheckUserNamespace returns ErrHostUserNamespace when the uid map at path
// (the process's /proc/self/uid_map) is the initial user namespace's, whose
// only line maps all 4294967295 ids onto themselves; any other map is a
// user namespace of its own.
func CheckUserNamespace(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s to check the build's user namespace: %w", path, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) == 1 {
		if f := strings.Fields(lines[0]); len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
			return ErrHostUserNamespace
		}
	}
	return nil
}
