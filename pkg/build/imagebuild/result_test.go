package imagebuild

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/archway-build/archway/pkg/platform"
)

func TestKeyableDockerfile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dockerfile string
		want       bool
	}{
		{"plain", "FROM base\nCOPY . /src\nRUN make\n", true},
		{"stage by name", "FROM base AS build\nRUN make\nFROM base\nCOPY --from=build /out /out\n", true},
		{"stage by index", "FROM base\nRUN make\nFROM base\nCOPY --from=0 /out /out\n", true},
		{"copy from an image", "FROM base\nCOPY --from=alpine:3 /etc/os-release /\n", false},
		{"stage named later", "FROM base\nCOPY --from=later /x /x\nFROM base AS later\n", false},
		{"add from a URL", "FROM base\nADD https://example.com/tool /tool\n", false},
		{"add from git", "FROM base\nADD git@github.com:a/b.git /src\n", false},
		{"run mount", "FROM base\nRUN --mount=type=cache,target=/root/.cache make\n", false},
		{"from another platform", "FROM --platform=$BUILDPLATFORM base\nRUN make\n", false},
		{"onbuild", "FROM base\nONBUILD RUN make\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyableDockerfile([]byte(tc.dockerfile)); got != tc.want {
				t.Errorf("keyableDockerfile(%q) = %v, want %v", tc.dockerfile, got, tc.want)
			}
		})
	}
}

// TestResultKey checks that each input of a build changes its result key.
func TestResultKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	write := func(content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("one", 0o644)
	dockerfile := []byte("FROM base\nCOPY a.txt /\n")
	amd64 := platform.Platform{OS: "linux", Architecture: "amd64"}
	bases := []resolvedBase{{Ref: "base", Digest: "sha256:aaaa"}}
	base := Request{ContextDir: dir, Args: map[string]string{"A": "1"}}
	key := func(req Request, df []byte, p platform.Platform, b []resolvedBase) string {
		t.Helper()
		k, err := resultKey(req, df, p, b)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	first := key(base, dockerfile, amd64, bases)
	if first == "" {
		t.Fatal("no key for a plain build")
	}
	if again := key(base, dockerfile, amd64, bases); again != first {
		t.Fatal("the same inputs give another key")
	}
	changed := map[string]string{}
	changed["dockerfile"] = key(base, []byte("FROM base\nCOPY a.txt /b\n"), amd64, bases)
	changed["platform"] = key(base, dockerfile, platform.Platform{OS: "linux", Architecture: "arm64"}, bases)
	changed["base digest"] = key(base, dockerfile, amd64, []resolvedBase{{Ref: "base", Digest: "sha256:bbbb"}})
	withArg := base
	withArg.Args = map[string]string{"A": "2"}
	changed["arg"] = key(withArg, dockerfile, amd64, bases)
	withLabel := base
	withLabel.Labels = map[string]string{"l": "v"}
	changed["label"] = key(withLabel, dockerfile, amd64, bases)
	withEnv := base
	withEnv.Env = []string{"E=1"}
	changed["env"] = key(withEnv, dockerfile, amd64, bases)
	docker := base
	docker.Format = FormatDocker
	changed["format"] = key(docker, dockerfile, amd64, bases)
	write("onf", 0o644)
	changed["one byte"] = key(base, dockerfile, amd64, bases)
	write("one", 0o755)
	changed["mode"] = key(base, dockerfile, amd64, bases)
	write("one", 0o644)
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if k := key(base, dockerfile, amd64, bases); k != first {
		t.Error("a file no instruction copies changes the key")
	}
	copyAll := []byte("FROM base\nCOPY . /\n")
	all := key(base, copyAll, amd64, bases)
	if err := os.WriteFile(filepath.Join(dir, "other"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed["new file, COPY ."] = key(base, copyAll, amd64, bases)
	if k := key(base, copyAll, amd64, bases); k == all {
		t.Error("a new file in the context does not change the key of COPY .")
	}
	if err := os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed["ignore file"] = key(base, dockerfile, amd64, bases)
	if err := os.Remove(filepath.Join(dir, ".dockerignore")); err != nil {
		t.Fatal(err)
	}
	glob := []byte("FROM base\nCOPY a.* /\n")
	globKey := key(base, glob, amd64, bases)
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed["new file, COPY a.*"] = key(base, glob, amd64, bases)
	if changed["new file, COPY a.*"] == globKey {
		t.Error("a new file a wildcard names does not change the key")
	}
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real", "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// buildah resolves an absolute link inside the context: sub/f is
	// real/f, not the host's /real/f.
	if err := os.Symlink("/real", filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	viaLink := []byte("FROM base\nCOPY sub/f /\n")
	linkKey := key(base, viaLink, amd64, bases)
	if err := os.WriteFile(filepath.Join(dir, "real", "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if k := key(base, viaLink, amd64, bases); k == linkKey {
		t.Error("a change behind a linked directory does not change the key")
	}
	for what, k := range changed {
		if k == first || k == "" {
			t.Errorf("changing the %s gives key %q, want another key", what, k)
		}
	}

	if k := key(Request{ContextDir: dir, RunMounts: []string{"/a:/b"}}, dockerfile, amd64, bases); k != "" {
		t.Errorf("a build with RUN mounts has key %q, want none", k)
	}
	if k := key(base, dockerfile, amd64, []resolvedBase{{Ref: "base"}}); k != "" {
		t.Errorf("a build with an unread base image has key %q, want none", k)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k := key(base, copyAll, amd64, bases); k != "" {
		t.Errorf("a context with a pipe has key %q, want none", k)
	}
}
