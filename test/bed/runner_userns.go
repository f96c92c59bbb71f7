package bed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A pod with hostUsers: false runs in a user namespace of its own, as a
// kubelet runs it: uid and gid 0 to usernsSize-1 inside map to a range of
// host ids no other pod of the runner holds, starting at
// usernsFirstHostID. Root in the pod is an unprivileged user on the host.
const (
	usernsSize        = 65536
	usernsFirstHostID = 16 * usernsSize
	// usernsSlots bounds the ranges handed out at once (host ids up to
	// 2^32 - 1).
	usernsSlots = 1<<16 - 16 - 1
)

// Reasons of pods the runner refuses to run, as a kubelet's admission.
const reasonUserNamespace = "UserNamespaceNotAllowed"

// userNamespace reports whether the pod asks for a user namespace
// (hostUsers: false), and refuses what a kubelet refuses with it:
// privileged containers and the host's network, PID or IPC namespace.
func userNamespace(pod *corev1.Pod) (bool, error) {
	if ptr.Deref(pod.Spec.HostUsers, true) {
		return false, nil
	}
	var bad []string
	if pod.Spec.HostNetwork {
		bad = append(bad, "hostNetwork")
	}
	if pod.Spec.HostPID {
		bad = append(bad, "hostPID")
	}
	if pod.Spec.HostIPC {
		bad = append(bad, "hostIPC")
	}
	for _, c := range allContainers(pod) {
		if sc := c.SecurityContext; sc != nil && ptr.Deref(sc.Privileged, false) {
			bad = append(bad, fmt.Sprintf("privileged container %q", c.Name))
		}
	}
	if len(bad) > 0 {
		return true, fmt.Errorf("hostUsers: false cannot be combined with %s", strings.Join(bad, ", "))
	}
	return true, nil
}

func userNSError(pod *corev1.Pod) error {
	_, err := userNamespace(pod)
	return err
}

// runtimeDefaultCaps are the capabilities containerd and CRI-O give a
// container that asks for none (containerd's defaultUnixCaps).
var runtimeDefaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// capabilities are a container's capabilities as a runtime computes them:
// the defaults, less securityContext.capabilities.drop (ALL drops them
// all), plus add.
func capabilities(c corev1.Container) []string {
	caps := slices.Clone(runtimeDefaultCaps)
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		return caps
	}
	norm := func(c corev1.Capability) string { return strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_") }
	for _, d := range sc.Capabilities.Drop {
		if norm(d) == "ALL" {
			caps = nil
			break
		}
		caps = slices.DeleteFunc(caps, func(c string) bool { return c == norm(d) })
	}
	for _, a := range sc.Capabilities.Add {
		if !slices.Contains(caps, norm(a)) {
			caps = append(caps, norm(a))
		}
	}
	return caps
}

// withCapabilities runs argv with only caps in its bounding set and none
// inheritable (setpriv): a process of the namespace's root keeps exactly
// those across exec.
func withCapabilities(caps []string, argv []string) ([]string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, fmt.Errorf("the bed's pod runner needs setpriv (util-linux) for capabilities: %w", err)
	}
	bounding := "-all"
	for _, c := range caps {
		bounding += ",+" + strings.ToLower(c)
	}
	return append([]string{setpriv, "--bounding-set", bounding, "--inh-caps", "-all", "--"}, argv...), nil
}

// idRange is the host ids of one pod's user namespace.
type idRange struct{ slot, base int }

// allocateIDs hands out a free host id range; release it with releaseIDs.
func (r *Runner) allocateIDs() (idRange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idSlots == nil {
		r.idSlots = map[int]bool{}
	}
	for slot := range usernsSlots {
		if !r.idSlots[slot] {
			r.idSlots[slot] = true
			return idRange{slot: slot, base: usernsFirstHostID + slot*usernsSize}, nil
		}
	}
	return idRange{}, errors.New("no free user-namespace id range")
}

func (r *Runner) releaseIDs(ids idRange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.idSlots, ids.slot)
}

// userNSAttr is the SysProcAttr part that starts a process in a new user
// namespace mapping ids 0..usernsSize-1 to the range at base; setgroups
// stays allowed, as a runtime leaves it.
func userNSAttr(attr *syscall.SysProcAttr, base int) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: usernsSize}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: usernsSize}}
	attr.GidMappingsEnableSetgroups = true
	// The child starts as the host's root, which has no id inside: it
	// becomes the namespace's root (as a runtime's init does) once the
	// maps are written, and keeps the namespace's capabilities across exec.
	attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
}

// prepareUserNS readies what a process in a user namespace must reach
// itself, with none of the host root's rights: the runner's directory and
// its parents searchable by others (mount sources are opened from inside),
// the image's binary in that directory, a home directory (HOME) and the
// pod's emptyDirs owned by the
// pod's root (as a runtime's idmapped mount shows them), and every mount
// point created on the host beforehand. It returns the binary's path.
func (p *podRun) prepareUserNS(cfg *containerConfig, binary string, ids idRange) (string, error) {
	if err := SearchableByOthers(p.r.Dir); err != nil {
		return "", err
	}
	if binary != "" {
		img, err := p.r.imageBinary(binary)
		if err != nil {
			return "", err
		}
		for i, a := range cfg.argv {
			if a == binary {
				cfg.argv[i] = img
			}
		}
		binary = img
	}
	// The runner's own HOME (/root, only the host's root may enter it)
	// would be the image's home of root: the pod's root gets one it owns.
	home := filepath.Join(p.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	if err := os.Lchown(home, ids.base, ids.base); err != nil {
		return "", err
	}
	for i, kv := range cfg.env {
		if kv == "HOME="+os.Getenv("HOME") {
			cfg.env[i] = "HOME=" + home
		}
	}
	for _, v := range p.pod.Spec.Volumes {
		if v.EmptyDir != nil {
			if err := os.Lchown(filepath.Join(p.dir, "volumes", v.Name), ids.base, ids.base); err != nil {
				return "", err
			}
		}
	}
	for _, m := range cfg.mounts {
		if err := mountPoint(m); err != nil {
			return "", err
		}
	}
	return binary, nil
}

// mountPoint creates a bind mount's target on the host if missing (a
// directory for a directory, an empty file for a file) and makes its
// parents searchable: the pod's root resolves the path itself, and the
// host's directories stand in for the image's (a host's
// /var/lib/containers is often 0700).
func mountPoint(m bindMount) error {
	st, err := os.Stat(m.src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		return SearchableByOthers(filepath.Dir(m.dst))
	}
	if err := os.MkdirAll(filepath.Dir(m.dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(m.dst, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SearchableByOthers(filepath.Dir(m.dst))
}

// SearchableByOthers adds the search bit for others to dir and each of its
// parents that lacks it (never read or write bits), so a pod in a user
// namespace, whose root is no one on the host, can reach what lies inside
// when its own modes let it.
func SearchableByOthers(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(dir, st.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// imageBinary is the image's binary as a file of the runner's directory,
// which the pod's root can execute (the original may sit in a directory only
// the host's root can enter): a hard link, or a copy across file systems.
func (r *Runner) imageBinary(binary string) (string, error) {
	sum := sha256.Sum256([]byte(binary))
	dst := filepath.Join(r.Dir, "images", hex.EncodeToString(sum[:8]), filepath.Base(binary))
	r.imageMu.Lock()
	defer r.imageMu.Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return "", err
	}
	// A link shares the file's mode: only for a file others may run.
	if st, err := os.Stat(real); err == nil && st.Mode().Perm()&0o005 == 0o005 {
		if err := os.Link(real, dst); err == nil {
			return dst, nil
		}
	}
	src, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}
