// Package emulation registers qemu's user-mode handlers with the kernel's
// binfmt_misc on a node and keeps the node's labels saying which foreign
// architectures it runs (emulation.archway.dev/<arch>=true), for build
// pods that build a platform under emulation. It is what the binfmt
// DaemonSet (manifests/emulation, cmd/emulation-setup) runs on each node.
package emulation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// BinfmtDir is where the kernel's binfmt_misc interface is mounted.
const BinfmtDir = "/proc/sys/fs/binfmt_misc"

// ConfDir holds qemu-user-static's registration lines, one file per
// handler (qemu-<name>.conf), as Debian and Fedora ship them.
const ConfDir = "/usr/lib/binfmt.d"

// Handler is one qemu binfmt_misc handler, qemu-<Name>, and the Go/OCI
// architecture whose binaries it runs.
type Handler struct {
	Name string
	Arch string
}

// Handlers are the qemu handlers emulation knows, by the architecture
// (kubernetes.io/arch value) they run. Each runs every variant of its
// architecture (qemu-arm runs arm v5, v6 and v7).
var Handlers = []Handler{
	{Name: "x86_64", Arch: "amd64"},
	{Name: "aarch64", Arch: "arm64"},
	{Name: "ppc64le", Arch: "ppc64le"},
	{Name: "s390x", Arch: "s390x"},
	{Name: "arm", Arch: "arm"},
	{Name: "i386", Arch: "386"},
	{Name: "riscv64", Arch: "riscv64"},
	{Name: "mips64el", Arch: "mips64le"},
	{Name: "loongarch64", Arch: "loong64"},
}

// HandlerFor returns the handler that runs arch's binaries.
func HandlerFor(arch string) (Handler, bool) {
	i := slices.IndexFunc(Handlers, func(h Handler) bool { return h.Arch == arch })
	if i < 0 {
		return Handler{}, false
	}
	return Handlers[i], true
}

// Architectures returns the architectures of Handlers.
func Architectures() []string {
	out := make([]string, len(Handlers))
	for i, h := range Handlers {
		out[i] = h.Arch
	}
	return out
}

// Registered returns the architectures whose qemu handler is registered in
// the binfmt_misc directory dir, enabled, and holds the F (fix binary)
// flag: without F the kernel opens the interpreter when a binary runs, in
// the mount namespace of the build's RUN step, where it does not exist. A
// disabled binfmt_misc has none.
func Registered(dir string) (map[string]bool, error) {
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return nil, fmt.Errorf("binfmt_misc is not mounted at %s: %w", dir, err)
	}
	out := map[string]bool{}
	if strings.TrimSpace(string(status)) != "enabled" {
		return out, nil
	}
	for _, h := range Handlers {
		data, err := os.ReadFile(filepath.Join(dir, "qemu-"+h.Name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading binfmt_misc handler qemu-%s: %w", h.Name, err)
		}
		if usable(string(data)) {
			out[h.Arch] = true
		}
	}
	return out, nil
}

// usable reports whether a handler file says enabled with the F flag.
func usable(contents string) bool {
	lines := strings.Split(strings.TrimSpace(contents), "\n")
	if len(lines) == 0 || lines[0] != "enabled" {
		return false
	}
	for _, line := range lines[1:] {
		if flags, ok := strings.CutPrefix(line, "flags:"); ok {
			return strings.Contains(flags, "F")
		}
	}
	return false
}

// Register registers the qemu handlers of archs that are not registered
// yet in the binfmt_misc directory dir, from the registration lines in
// confDir (qemu-<name>.conf), and returns the architectures it
// registered. A handler already registered is left as it is (binfmt_misc
// is machine-wide: another program may own it), and nothing is ever
// unregistered. A registration line without the F flag is refused.
func Register(dir, confDir string, archs []string) ([]string, error) {
	have, err := Registered(dir)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, arch := range archs {
		h, ok := HandlerFor(arch)
		if !ok {
			return done, fmt.Errorf("no qemu handler known for architecture %q; known: %s", arch, strings.Join(Architectures(), ", "))
		}
		if have[arch] {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "qemu-"+h.Name)); err == nil {
			return done, fmt.Errorf("binfmt_misc handler qemu-%s is registered but disabled or without the F flag; remove it (echo -1 > %s) and restart",
				h.Name, filepath.Join(dir, "qemu-"+h.Name))
		}
		conf := filepath.Join(confDir, "qemu-"+h.Name+".conf")
		line, err := os.ReadFile(conf)
		if err != nil {
			return done, fmt.Errorf("reading the registration of qemu-%s (install qemu-user-static): %w", h.Name, err)
		}
		reg := strings.TrimSpace(string(line))
		if f := reg[strings.LastIndex(reg, ":")+1:]; !strings.Contains(f, "F") {
			return done, fmt.Errorf("%s registers qemu-%s without the F flag (flags %q): a build's RUN steps could not find the interpreter", conf, h.Name, f)
		}
		if err := os.WriteFile(filepath.Join(dir, "register"), []byte(reg), 0); err != nil { //nolint:gosec // dir is the operator's --binfmt-dir, and register its kernel file
			return done, fmt.Errorf("registering qemu-%s: %w", h.Name, err)
		}
		done = append(done, arch)
	}
	return done, nil
}

// Registrable splits archs (all known to HandlerFor) into those Register
// can register on a node of architecture native, and those it skips with
// the reason: the node's own architecture needs no handler, and an
// architecture without a registration line in confDir has none to
// register (Debian's qemu-user-static for arm64 ships none for arm,
// which most arm64 machines run natively). It returns an error, saying
// what to install, when archs is not empty and none can be registered.
func Registrable(confDir, native string, archs []string) (keep, skipped []string, err error) {
	for _, arch := range archs {
		h, ok := HandlerFor(arch)
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("no qemu handler known for architecture %q; known: %s", arch, strings.Join(Architectures(), ", "))
		case arch == native:
			skipped = append(skipped, arch+" (the node's own architecture)")
			continue
		}
		if _, err := os.Stat(filepath.Join(confDir, "qemu-"+h.Name+".conf")); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (no registration line %s)", arch, filepath.Join(confDir, "qemu-"+h.Name+".conf")))
			continue
		}
		keep = append(keep, arch)
	}
	if len(keep) == 0 && len(skipped) > 0 && len(skipped) > countNative(archs, native) {
		return nil, skipped, fmt.Errorf("no qemu registration line in %s for any of %s: install qemu-user-static (or use the emulation-setup image)", confDir, strings.Join(archs, ", "))
	}
	return keep, skipped, nil
}

func countNative(archs []string, native string) int {
	n := 0
	for _, a := range archs {
		if a == native {
			n++
		}
	}
	return n
}
