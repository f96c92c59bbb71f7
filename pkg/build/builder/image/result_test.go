package image

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/archway-build/archway/pkg/build/dockerfile"
	"github.com/archway-build/archway/pkg/platform"
)

// keyTest is a build context for result key tests: a.txt, a Dockerfile
// copying it, and a clone's .git, in a fresh directory.
type keyTest struct {
	t   *testing.T
	dir string
	req Request
	in  keyedBuild
}

func newKeyTest(t *testing.T) *keyTest {
	t.Helper()
	k := &keyTest{t: t, dir: t.TempDir()}
	k.write("a.txt", "one", 0o644)
	k.write("Dockerfile", "FROM base\nCOPY a.txt /\n", 0o644)
	k.write(".git/HEAD", "ref: refs/heads/main\n", 0o644)
	k.req = Request{ContextDir: k.dir, Args: map[string]string{"A": "1"}}
	k.in = keyedBuild{
		target:       platform.Platform{OS: "linux", Architecture: "amd64"},
		bases:        []resolvedBase{{Ref: "base", Digest: "sha256:aaaa"}},
		platformArgs: platformBuildArgs("linux", "amd64", ""),
	}
	return k
}

// write writes a file of the context, making its directories.
func (k *keyTest) write(name, content string, mode os.FileMode) {
	k.t.Helper()
	p := filepath.Join(k.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		k.t.Fatal(err)
	}
}

// key is the result key of the build as its files are now: the Dockerfile
// and ignore file are read as build reads them.
func (k *keyTest) key() string {
	k.t.Helper()
	key, err := resultKey(k.req, k.keyed())
	if err != nil {
		k.t.Fatal(err)
	}
	return key
}

// keyed is k.in with the Dockerfile and ignore file as they are now.
func (k *keyTest) keyed() keyedBuild {
	k.t.Helper()
	in := k.in
	path := dockerfilePath(k.req)
	df, err := os.ReadFile(path)
	if err != nil {
		k.t.Fatal(err)
	}
	if in.file, err = dockerfile.Parse(df); err != nil {
		k.t.Fatal(err)
	}
	if in.ignore, err = findIgnoreFile(k.req.ContextDir, path); err != nil {
		k.t.Fatal(err)
	}
	return in
}

// TestResultKey checks that each input of a build changes its result key
// on its own: every case starts from a fresh context, takes the key, changes
// one thing and takes the key again.
func TestResultKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(k *keyTest) // sets the case up before the first key
		change func(k *keyTest)
		same   bool // the change must not change the key
	}{
		{name: "Dockerfile", change: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY a.txt /b\n", 0o644) }},
		{name: "platform", change: func(k *keyTest) { k.in.target = platform.Platform{OS: "linux", Architecture: "arm64"} }},
		{name: "base digest", change: func(k *keyTest) { k.in.bases = []resolvedBase{{Ref: "base", Digest: "sha256:bbbb"}} }},
		{name: "arg", change: func(k *keyTest) { k.req.Args = map[string]string{"A": "2"} }},
		{name: "builder's architecture (BUILDARCH)", change: func(k *keyTest) {
			k.in.platformArgs = maps.Clone(k.in.platformArgs)
			k.in.platformArgs["BUILDARCH"] = "other"
		}},
		{name: "label", change: func(k *keyTest) { k.req.Labels = map[string]string{"l": "v"} }},
		{name: "env", change: func(k *keyTest) { k.req.Env = []string{"E=1"} }},
		{name: "format", change: func(k *keyTest) { k.req.Format = FormatDocker }},
		{name: "target stage", change: func(k *keyTest) { k.req.Target = "build" }},
		{name: "squashed", change: func(k *keyTest) { k.req.Squash = true }},
		{name: "builder executable", change: func(k *keyTest) {
			saved := executableDigest
			executableDigest = func() (string, error) { return "sha256:another-builder", nil }
			k.t.Cleanup(func() { executableDigest = saved })
		}},
		{name: "one byte of a copied file", change: func(k *keyTest) { k.write("a.txt", "onf", 0o644) }},
		{name: "mode of a copied file", change: func(k *keyTest) { k.write("a.txt", "one", 0o755) }},
		{name: "a file no instruction copies", same: true, change: func(k *keyTest) {
			k.write("b.txt", "x", 0o644)
			if err := os.Symlink("a.txt", filepath.Join(k.dir, "link")); err != nil {
				k.t.Fatal(err)
			}
		}},
		{name: "the clone's .git", same: true, change: func(k *keyTest) { k.write(".git/HEAD", "ref: refs/heads/other\n", 0o644) }},
		{name: "new file, COPY .",
			before: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY . /\n", 0o644) },
			change: func(k *keyTest) { k.write("other", "x", 0o644) }},
		{name: "new file, COPY a.*",
			before: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY a.* /\n", 0o644) },
			change: func(k *keyTest) { k.write("a.md", "x", 0o644) }},
		{name: "a file behind a linked directory",
			before: func(k *keyTest) {
				k.write("real/f", "1", 0o644)
				// buildah resolves an absolute link inside the context:
				// sub/f is real/f, not the host's /real/f.
				if err := os.Symlink("/real", filepath.Join(k.dir, "sub")); err != nil {
					k.t.Fatal(err)
				}
				k.write("Dockerfile", "FROM base\nCOPY sub/f /\n", 0o644)
			},
			change: func(k *keyTest) { k.write("real/f", "2", 0o644) }},
		{name: "JSON-form source named <<x (not a here-document)",
			before: func(k *keyTest) {
				k.write("<<x", "1", 0o644)
				k.write("Dockerfile", "FROM base\nCOPY [\"<<x\", \"/d\"]\n", 0o644)
			},
			change: func(k *keyTest) { k.write("<<x", "2", 0o644) }},
		{name: "here-document",
			before: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY <<x /d\none\nx\n", 0o644) },
			change: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY <<x /d\ntwo\nx\n", 0o644) }},
		{name: "a here-document's name in the context", same: true,
			before: func(k *keyTest) {
				k.write("<<x", "1", 0o644)
				k.write("Dockerfile", "FROM base\nCOPY <<x /d\none\nx\n", 0o644)
			},
			change: func(k *keyTest) { k.write("<<x", "2", 0o644) }},
		{name: "an extended attribute of a copied file",
			change: func(k *keyTest) {
				if err := unix.Setxattr(filepath.Join(k.dir, "a.txt"), "user.rev", []byte("2"), 0); err != nil {
					k.t.Skipf("this file system keeps no user extended attributes: %v", err)
				}
			}},
		{name: "a quoted source (buildah unquotes it)",
			before: func(k *keyTest) { k.write("Dockerfile", "FROM base\nCOPY \"b.txt\" /x\n", 0o644) },
			change: func(k *keyTest) { k.write("b.txt", "changed", 0o644) }},
		{name: "a bind-mounted file",
			before: func(k *keyTest) {
				k.write("Dockerfile", "FROM base\nRUN --mount=type=bind,source=go.mod,target=/m cat /m\n", 0o644)
			},
			change: func(k *keyTest) { k.write("go.mod", "module x\n", 0o644) }},
		{name: "a bind-mounted file the ignore file leaves out (a mount shows it)",
			before: func(k *keyTest) {
				k.write(".dockerignore", "go.mod\n", 0o644)
				k.write("go.mod", "module a\n", 0o644)
				k.write("Dockerfile", "FROM base\nRUN --mount=src=go.mod,target=/m cat /m\n", 0o644)
			},
			change: func(k *keyTest) { k.write("go.mod", "module b\n", 0o644) }},
		{name: "a file below a bind-mounted directory",
			before: func(k *keyTest) {
				k.write("src/a.go", "package a\n", 0o644)
				k.write("Dockerfile", "FROM base\nRUN --mount=type=bind,source=/src/,target=/s --mount=type=cache,target=/c ls /s\n", 0o644)
			},
			change: func(k *keyTest) { k.write("src/b.go", "package a\n", 0o644) }},
		{name: "anything, with the whole context bind-mounted",
			before: func(k *keyTest) {
				k.write("Dockerfile", "FROM base\nRUN --mount=type=bind,target=/ctx ls /ctx\n", 0o644)
			},
			change: func(k *keyTest) { k.write(".git/HEAD", "ref: refs/heads/other\n", 0o644) }},
		{name: "a file beside a bind-mounted one", same: true,
			before: func(k *keyTest) {
				k.write("Dockerfile", "FROM base\nRUN --mount=type=bind,source=go.mod,target=/m cat /m\n", 0o644)
			},
			change: func(k *keyTest) { k.write("b.txt", "x", 0o644) }},
		{name: "a file of a stage's bind mount's path in the context", same: true,
			before: func(k *keyTest) {
				k.write("Dockerfile", "FROM base AS s\nFROM base\nRUN --mount=type=bind,from=s,source=/etc,target=/e ls /e\n", 0o644)
			},
			change: func(k *keyTest) { k.write("etc/x", "x", 0o644) }},
		{name: ".dockerignore", change: func(k *keyTest) { k.write(".dockerignore", "other\n", 0o644) }},
		{name: ".containerignore over .dockerignore",
			before: func(k *keyTest) { k.write(".containerignore", "x\n", 0o644) },
			change: func(k *keyTest) { k.write(".containerignore", "y\n", 0o644) }},
		{name: ".dockerignore beside a .containerignore", same: true,
			before: func(k *keyTest) { k.write(".containerignore", "x\n", 0o644) },
			change: func(k *keyTest) { k.write(".dockerignore", "y\n", 0o644) }},
		{name: "another Dockerfile's ignore file", same: true,
			before: func(k *keyTest) {
				k.req.Dockerfile = "b.Dockerfile"
				k.write("b.Dockerfile", "FROM base\nCOPY a.txt /\n", 0o644)
			},
			change: func(k *keyTest) { k.write("a.Dockerfile.dockerignore", "a.txt\n", 0o644) }},
		{name: "the Dockerfile's own ignore file",
			before: func(k *keyTest) {
				k.write("a.Dockerfile.dockerignore", "d/x\n", 0o644)
				k.write("a.Dockerfile", "FROM base\nCOPY a.txt /\n", 0o644)
				k.write("b.Dockerfile", "FROM base\nCOPY a.txt /\n", 0o644)
				k.req.Dockerfile = "b.Dockerfile"
			},
			// The same content under another name: only the ignore file
			// buildah picks by the Dockerfile's name differs.
			change: func(k *keyTest) { k.req.Dockerfile = "a.Dockerfile" }},
		{name: "<Dockerfile>.dockerignore over <Dockerfile>.containerignore",
			before: func(k *keyTest) {
				k.write("Dockerfile.containerignore", "x\n", 0o644)
				k.write("Dockerfile.dockerignore", "x\n", 0o644)
			},
			change: func(k *keyTest) { k.write("Dockerfile.dockerignore", "y\n", 0o644) }},
		{name: "the ignore file of a Dockerfile outside the context",
			before: func(k *keyTest) {
				outside := k.t.TempDir()
				k.req.Dockerfile = filepath.Join(outside, "Dockerfile")
				if err := os.WriteFile(k.req.Dockerfile, []byte("FROM base\nCOPY a.txt /\n"), 0o644); err != nil {
					k.t.Fatal(err)
				}
			},
			change: func(k *keyTest) {
				if err := os.WriteFile(k.req.Dockerfile+".dockerignore", []byte("x\n"), 0o644); err != nil {
					k.t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeyTest(t)
			if tc.before != nil {
				tc.before(k)
			}
			first := k.key()
			if first == "" {
				t.Fatal("no key")
			}
			if again := k.key(); again != first {
				t.Fatal("the same inputs give another key")
			}
			tc.change(k)
			second := k.key()
			switch {
			case second == "":
				t.Error("no key after the change")
			case tc.same && second != first:
				t.Error("the key changed")
			case !tc.same && second == first:
				t.Error("the key did not change")
			}
		})
	}
}

// TestResultKeyNone checks that builds reading what the key cannot see have
// no key.
func TestResultKeyNone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(k *keyTest)
	}{
		{"RUN mounts", func(k *keyTest) { k.req.RunMounts = []string{"/a:/b"} }},
		{"an unread base image", func(k *keyTest) { k.in.bases = []resolvedBase{{Ref: "base"}} }},
		{"a base image with ONBUILD triggers", func(k *keyTest) {
			k.in.bases = []resolvedBase{{Ref: "base", Digest: "sha256:aaaa", OnBuild: true}}
		}},
		{"an unknown builder executable", func(k *keyTest) {
			saved := executableDigest
			executableDigest = func() (string, error) { return "", fs.ErrNotExist }
			k.t.Cleanup(func() { executableDigest = saved })
		}},
		{"a Dockerfile buildah runs through cpp (*.in)", func(k *keyTest) {
			k.write("Containerfile.in", "FROM base\nCOPY a.txt /\n", 0o644)
			k.req.Dockerfile = "Containerfile.in"
		}},
		{"images that cannot be told", func(k *keyTest) { k.in.unkeyedImages = true }},
		{"a pipe in the context, COPY .", func(k *keyTest) {
			k.write("Dockerfile", "FROM base\nCOPY . /\n", 0o644)
			if err := syscall.Mkfifo(filepath.Join(k.dir, "fifo"), 0o600); err != nil {
				k.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeyTest(t)
			if k.key() == "" {
				t.Fatal("no key before the change")
			}
			tc.change(k)
			if key := k.key(); key != "" {
				t.Errorf("key %q, want none", key)
			}
		})
	}
}

// TestPlatformBuildArgs checks that the BUILD* args name this machine.
func TestPlatformBuildArgs(t *testing.T) {
	args := platformBuildArgs("linux", "arm64", "")
	if args["BUILDARCH"] != runtime.GOARCH || args["BUILDOS"] != runtime.GOOS || args["TARGETARCH"] != "arm64" {
		t.Errorf("platform args %v", args)
	}
}

// TestBuilderIdentity: the builder is identified by its Go build ID, as
// the go command reads it (a digest of the build's inputs and of the linked
// binary), and a binary without one by the sha256 of its bytes.
func TestBuilderIdentity(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatalf("go tool buildid %s: %v", exe, err)
	}
	id, err := builderIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if want := "go-buildid:" + strings.TrimSpace(string(out)); !strings.HasSuffix(id, " "+want) {
		t.Errorf("builder identity %q does not end with the executable's build ID %s", id, want)
	}

	// An ELF file that is not a Go program, and a file that is not ELF.
	for _, path := range []string{"/bin/true", "/etc/passwd"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := executableIdentity(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); got != want {
			t.Errorf("identity of %s (no Go build ID) = %q, want its digest %s", path, got, want)
		}
	}
}

// TestIgnoreFileRead checks that an ignore file is read inside the context,
// as a regular file of bounded size, and never blocks.
func TestIgnoreFileRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, dir string)
		wantErr string
	}{
		{"a named pipe", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, ".dockerignore"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "named pipe, not a regular file"},
		{"a link to a pipe outside", func(t *testing.T, dir string) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(fifo, filepath.Join(dir, ".dockerignore")); err != nil {
				t.Fatal(err)
			}
		}, "inside the build context"},
		{"a link to /dev/zero", func(t *testing.T, dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, ".containerignore")); err != nil {
				t.Fatal(err)
			}
		}, "inside the build context"},
		{"a link to a file outside", func(t *testing.T, dir string) {
			secret := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secret, []byte("x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(secret, filepath.Join(dir, "Dockerfile.dockerignore")); err != nil {
				t.Fatal(err)
			}
		}, "inside the build context"},
		{"a directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, ".dockerignore"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "directory, not a regular file"},
		{"too large", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, ".dockerignore"), make([]byte, maxIgnoreFileSize+1), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "more than"},
		{"a link inside the context", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "common.ignore"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("common.ignore", filepath.Join(dir, ".dockerignore")); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a link to nothing (none)", func(t *testing.T, dir string) {
			if err := os.Symlink("nothing", filepath.Join(dir, ".dockerignore")); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM base\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.make(t, dir)
			type result struct {
				f   ignoreFile
				err error
			}
			done := make(chan result, 1)
			go func() {
				f, err := findIgnoreFile(dir, filepath.Join(dir, "Dockerfile"))
				done <- result{f, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("reading the ignore file blocks")
			}
			switch {
			case tc.wantErr == "" && r.err != nil:
				t.Errorf("error %v, want none", r.err)
			case tc.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", r.err, tc.wantErr)
			}
		})
	}
}
