package builder_test

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/archway-build/archway/test/bed"
)

// elfMachines are the ELF machines of the architectures CI runs on.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}

// TestMakeImagesWithoutRoot runs make images' script (hack/images.sh) as
// an unprivileged user of this machine, as a person without root does: a
// user added for the test, with the range of subordinate ids useradd
// gives a new user in /etc/subuid and /etc/subgid. The script then runs
// the builder as root of a user namespace (hack/userns.sh). To keep it
// cheap it builds one image, build-controller, for this machine's platform
// only, from binaries compiled as root beforehand (IMAGES_STEPS=compile;
// the user has no Go build cache, and a cold compile of archway takes
// minutes of both cores), on a base holding a directory owned by 65532,
// as distroless's nonroot does: storing that layer needs uid 65532 in the
// namespace, which only the user's range gives. The index the user pushed
// is read back: its one platform, the entrypoint and user, the binary
// (owned by root in the image, not by the user's uid) and the base's
// directory still owned by 65532. A user without a range is then told what
// to add, and nothing is pushed.
func TestMakeImagesWithoutRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test adds a user to the machine (useradd) and compiles as root: run the builder suite as root")
	}
	g := NewWithT(t)
	ctx := t.Context()
	arch := runtime.GOARCH
	machine, ok := elfMachines[arch]
	if !ok {
		t.Fatalf("no ELF machine known for %s: add it to elfMachines", arch)
	}
	platform := "linux/" + arch

	u := addUser(t)
	ws := userDir(t, u)
	base := nonrootBase(t)
	out := filepath.Join(ws, "out")
	registry := theBed.Registry.Host + "/rootless"
	vars := []string{
		"IMAGES=build-controller", "PLATFORMS=" + platform, "IMAGES_OUT=" + out,
		"REGISTRY=" + registry, "TAG=v1", "BUILD_CONTROLLER_BASE_IMAGE=" + base,
	}

	// The compile, as root: archway's packages for this machine come from
	// the build cache the tests' compile filled (one set of flags for the
	// tests and make images); only the link is new.
	msg, took, err := runImagesScript(ctx, filepath.Join(bed.RepoRoot(), "hack", "images.sh"), nil,
		slices.Concat(os.Environ(), vars, []string{"IMAGES_STEPS=compile"}))
	if err != nil {
		t.Fatalf("hack/images.sh as root: %v\n%s", err, msg)
	}
	t.Logf("compile as root: %s", took)

	// The user runs a copy of the scripts and the Containerfile in its own
	// directory: the clone may be where it cannot read (CI's is in a
	// directory of mode 0700). The builder that runs the build is the
	// suite's, the one make images would compile.
	script := copyScripts(t, ws, u)
	builder, err := builderBinary()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(copyFile(builder, filepath.Join(ws, "builder"), 0o755, u)).To(Succeed())
	userVars := slices.Concat(vars, []string{"IMAGES_STEPS=build", "BUILDER_BIN=" + filepath.Join(ws, "builder")})

	pushed := t.Run("the user's build pushes the image", func(t *testing.T) {
		g := NewWithT(t)
		msg, took, err := runImagesScript(ctx, script, u, u.env(ws, userVars))
		if err != nil {
			t.Fatalf("hack/images.sh as uid %d: %v\n%s", u.uid, err, msg)
		}
		t.Logf("build as uid %d: %s", u.uid, took)
		g.Expect(msg).To(ContainSubstring("(in a user namespace: not root)"))

		ref := registry + "/build-controller:v1"
		img, err := theBed.Registry.OpenImage(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		defer img.Close()
		index, _, err := img.Index(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(index.Manifests).To(HaveLen(1), "%s: one image, for %s", ref, platform)
		d := index.Manifests[0]
		g.Expect(d.Platform).NotTo(BeNil())
		g.Expect(d.Platform.OS + "/" + d.Platform.Architecture).To(Equal(platform))

		child, err := theBed.Registry.OpenImage(ctx, registry+"/build-controller@"+d.Digest.String())
		g.Expect(err).NotTo(HaveOccurred())
		defer child.Close()
		cfg, err := child.Config(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/build-controller"}))
		g.Expect(cfg.Config.User).To(Equal("65532:65532"))

		entries, err := img.LayerEntries(ctx, d.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		bin := findEntry(entries, "usr/local/bin/build-controller")
		g.Expect(bin).NotTo(BeNil(), "the image has no /usr/local/bin/build-controller")
		f, err := elf.NewFile(bytes.NewReader(bin.Content))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Machine).To(Equal(machine))
		// Root of the namespace, the user outside it, wrote the file as
		// root: the image records 0, not the user's uid.
		g.Expect([]int{bin.UID, bin.GID}).To(Equal([]int{0, 0}), "owner of /usr/local/bin/build-controller")
		home := findEntry(entries, "home/nonroot")
		g.Expect(home).NotTo(BeNil(), "the image has no /home/nonroot from its base")
		g.Expect([]int{home.UID, home.GID}).To(Equal([]int{65532, 65532}), "owner of /home/nonroot")
	})

	if !pushed {
		return
	}
	t.Run("a user without a range is told what to add", func(t *testing.T) {
		g := NewWithT(t)
		// After the push above (the positive signal), the same build with
		// the user's ranges removed.
		g.Expect(runCommand(ctx, "usermod", "--del-subuids", u.subuids, "--del-subgids", u.subgids, u.name)).To(Succeed())
		msg, _, err := runImagesScript(ctx, script, u, u.env(ws, slices.Concat(userVars, []string{"TAG=v2"})))
		g.Expect(err).To(HaveOccurred(), msg)
		g.Expect(msg).To(ContainSubstring("hack/userns.sh: " + u.name + " has no range of 65536 ids in /etc/subuid and /etc/subgid"))
		g.Expect(msg).To(ContainSubstring("usermod --add-subuids 100000-165535 --add-subgids 100000-165535 " + u.name))
		tags, err := theBed.Registry.Tags(ctx, "rootless/build-controller")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"v1"}))
	})
}

// testUser is a user of this machine added for a test.
type testUser struct {
	name             string
	uid, gid         int
	subuids, subgids string // its ranges, FIRST-LAST
}

// credential runs a process as the user, with no supplementary groups.
func (u *testUser) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}
}

// env is the environment of the user's processes: the PATH, a home and a
// temporary directory in dir, and vars; nothing else of root's.
func (u *testUser) env(dir string, vars []string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + filepath.Join(dir, "tmp"),
		"USER=" + u.name, "LOGNAME=" + u.name,
	}, vars...)
}

// addUser adds a user with no home and no login shell, and the range of
// 65536 subordinate uids and gids useradd gives a new user (in
// /etc/subuid and /etc/subgid); the test's cleanup deletes it and its
// ranges.
func addUser(t *testing.T) *testUser {
	t.Helper()
	// A name of its own: tests in other clones may run on the machine.
	name := fmt.Sprintf("archway-t%d", os.Getpid())
	// useradd gives ranges only when the files exist.
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = fh.Close()
	}
	if err := runCommand(t.Context(), "useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
		"-K", "SUB_UID_COUNT=65536", "-K", "SUB_GID_COUNT=65536", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := runCommand(context.Background(), "userdel", name); err != nil {
			t.Errorf("removing the test's user: %v", err)
		}
		for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
			if r, _ := subordinateRange(f, name); r != "" {
				t.Errorf("userdel left %s's range %s in %s", name, r, f)
			}
		}
	})
	pw, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	u := &testUser{name: name}
	u.uid, _ = strconv.Atoi(pw.Uid)
	u.gid, _ = strconv.Atoi(pw.Gid)
	for _, r := range []struct {
		file string
		into *string
	}{{"/etc/subuid", &u.subuids}, {"/etc/subgid", &u.subgids}} {
		if *r.into, err = subordinateRange(r.file, name); err != nil {
			t.Fatal(err)
		}
		if *r.into == "" {
			t.Fatalf("useradd gave %s no range in %s (SUB_UID_MIN..SUB_UID_MAX of /etc/login.defs full?)", name, r.file)
		}
	}
	t.Logf("user %s: uid %d, subordinate uids %s, gids %s", name, u.uid, u.subuids, u.subgids)
	return u
}

// subordinateRange prints name's range in file (/etc/subuid's format) as
// FIRST-LAST, or "" when it has none.
func subordinateRange(file, name string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 || f[0] != name {
			continue
		}
		first, err1 := strconv.Atoi(f[1])
		count, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("%s: %q: %w", file, line, err)
		}
		return fmt.Sprintf("%d-%d", first, first+count-1), nil
	}
	return "", nil
}

// userDir makes a directory the user owns, with home and tmp in it; the
// test's cleanup removes it.
func userDir(t *testing.T, u *testUser) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "archway-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for _, d := range []string{dir, filepath.Join(dir, "home"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// nonrootBase pushes, as root, the bed's busybox for this machine with a
// directory /home/nonroot owned by 65532:65532 (as distroless's nonroot
// image, make images' default base, has) and returns its reference.
func nonrootBase(t *testing.T) string {
	t.Helper()
	dir := writeContext(t, "FROM "+theBed.BaseImage+"\nCOPY --chown=65532:65532 nonroot /home/nonroot\n")
	if err := os.MkdirAll(filepath.Join(dir, "nonroot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nonroot", ".keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := theBed.Registry.Host + "/rootless/nonroot-base:v1"
	if log, code := runBuilder(t, nil, "build", "--platform", "linux/"+runtime.GOARCH, "-t", ref, dir); code != 0 {
		t.Fatalf("pushing the base %s: exit %d\n%s", ref, code, log)
	}
	return ref
}

// copyScripts copies what hack/images.sh reads of the clone, for
// build-controller, into dir (owned by u) and returns the copy's
// images.sh.
func copyScripts(t *testing.T, dir string, u *testUser) string {
	t.Helper()
	root := bed.RepoRoot()
	for _, f := range []string{"hack/images.sh", "hack/userns.sh", "images/build-controller/Containerfile"} {
		dest := filepath.Join(dir, "repo", f)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(filepath.Join(root, f), dest, 0o755, u); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "repo", "hack", "images.sh")
}

// copyFile copies src to dest with mode, owned by u.
func copyFile(src, dest string, mode os.FileMode, u *testUser) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chown(dest, u.uid, u.gid)
}

// runImagesScript runs script (a hack/images.sh) with env, as u (nil:
// root), and returns its output and what it took: wall time and CPU time
// (user and system, of it and every process it waited for).
func runImagesScript(ctx context.Context, script string, u *testUser, env []string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, bed.BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = env
	if u != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.credential()}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); cmd.ProcessState == nil {
		return out.String(), "", err
	} else if err != nil {
		return out.String(), "", fmt.Errorf("%w after %s", err, time.Since(start).Round(100*time.Millisecond))
	}
	took := fmt.Sprintf("%s, cpu %s", time.Since(start).Round(100*time.Millisecond),
		(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Round(100*time.Millisecond))
	return out.String(), took, nil
}

// runCommand runs a program as root and returns an error with its output
// when it fails.
func runCommand(ctx context.Context, name string, args ...string) error {
	if msg, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, msg)
	}
	return nil
}

// findEntry returns the last entry named name (the one a pull keeps; a
// directory's name may end in a slash), or nil.
func findEntry(entries []bed.LayerEntry, name string) *bed.LayerEntry {
	for j := len(entries) - 1; j >= 0; j-- {
		if strings.TrimSuffix(entries[j].Name, "/") == name {
			return &entries[j]
		}
	}
	return nil
}
