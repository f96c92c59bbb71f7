package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tarNames uploads dir as --from-dir does for a build whose context is
// bctx, and returns the names in the archive.
func tarNames(t *testing.T, dir string, bctx buildContext) []string {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	filter, err := newUploadFilter(root, bctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarDir(&buf, root, filter); err != nil {
		t.Fatal(err)
	}
	return namesOfTarGz(t, &buf)
}

// namesOfTarGz lists the names in a gzipped tar, sorted.
func namesOfTarGz(t *testing.T, r io.Reader) []string {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(hdr.Name, "/"))
	}
	slices.Sort(names)
	return names
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUploadFilter(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		".git/HEAD": "ref: refs/heads/main\n", "vendor/lib/.git": "gitdir: ../../.git/modules/lib\n", "vendor/lib/lib.go": "package lib\n",
		"Dockerfile": "FROM scratch\n", ".dockerignore": "# comment\n*.log\n!keep.log\nsecrets/\nDockerfile\n.dockerignore\nbuild/**\n!build/dist/app\n",
		"main.go": "package main\n", "debug.log": "x", "keep.log": "y", "secrets/token": "s3cr3t", "build/tmp/o.o": "o", "build/dist/app": "app",
	})
	got := tarNames(t, dir, buildContext{})
	want := []string{".dockerignore", "Dockerfile", "build", "build/dist/app", "keep.log", "main.go", "vendor", "vendor/lib", "vendor/lib/lib.go"}
	if !slices.Equal(got, want) {
		t.Errorf("uploaded %v\nwant     %v", got, want)
	}

	// The ignore file of the context: contextDir's, patterns relative to
	// it; files outside the context are sent as they are.
	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{
		"README": "r", ".dockerignore": "README\n", "app/Containerfile": "FROM scratch\n", "app/.dockerignore": "*.tmp\n",
		"app/a.tmp": "t", "app/src/b.tmp": "t", "app/src/main.c": "c",
	})
	got = tarNames(t, dir, buildContext{dir: "app"})
	want = []string{".dockerignore", "README", "app", "app/.dockerignore", "app/Containerfile", "app/src", "app/src/b.tmp", "app/src/main.c"}
	if !slices.Equal(got, want) {
		t.Errorf("contextDir app: uploaded %v\nwant     %v", got, want)
	}

	// <Dockerfile>.dockerignore comes first, as buildah reads it.
	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{
		"docker/app.Dockerfile": "FROM scratch\n", "docker/app.Dockerfile.dockerignore": "docs\n", ".dockerignore": "src\n",
		"docs/x.md": "x", "src/y.c": "y",
	})
	got = tarNames(t, dir, buildContext{dockerfile: "docker/app.Dockerfile"})
	want = []string{".dockerignore", "docker", "docker/app.Dockerfile", "docker/app.Dockerfile.dockerignore", "src", "src/y.c"}
	if !slices.Equal(got, want) {
		t.Errorf("app.Dockerfile.dockerignore: uploaded %v\nwant     %v", got, want)
	}

	// Without an ignore file only .git is left out.
	dir = t.TempDir()
	writeFiles(t, dir, map[string]string{".git/config": "c", "a/.git/x": "x", "a/b": "b", ".gitignore": "g"})
	if got, want := tarNames(t, dir, buildContext{}), []string{".gitignore", "a", "a/b"}; !slices.Equal(got, want) {
		t.Errorf("no ignore file: uploaded %v, want %v", got, want)
	}

	// An ignore file that is not a regular file is refused.
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".dockerignore"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := newUploadFilter(root, buildContext{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory as .dockerignore: %v", err)
	}
}

// TestUploadExclude: --exclude leaves out, besides .git and the ignore
// file's patterns, the paths it matches (a directory with its files), as
// oc start-build --exclude does; it is refused without --from-dir or when
// it is not a regular expression.
func TestUploadExclude(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		".git/HEAD": "ref: refs/heads/main\n", "Dockerfile": "FROM scratch\n", ".dockerignore": "*.log\n",
		"main.go": "package main\n", "main_test.go": "package main\n", "debug.log": "x",
		"node_modules/a/index.js": "a", "web/node_modules/b.js": "b", "web/app.js": "app",
	})
	in := binaryInput{dir: dir, exclude: `(^|/)node_modules(/|$)|_test\.go$`}
	if err := in.check(); err != nil {
		t.Fatal(err)
	}
	rc, _, err := in.open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := namesOfTarGz(t, rc)
	want := []string{".dockerignore", "Dockerfile", "main.go", "web", "web/app.js"}
	if !slices.Equal(got, want) {
		t.Errorf("uploaded %v\nwant     %v", got, want)
	}
	for _, tc := range []struct {
		in   binaryInput
		want string
	}{
		{binaryInput{file: "Dockerfile", exclude: "x"}, "--exclude leaves files of --from-dir out: give it with --from-dir"},
		{binaryInput{repo: ".", exclude: "x"}, "give it with --from-dir"},
		{binaryInput{dir: dir, exclude: "(unclosed"}, `--exclude "(unclosed": error parsing regexp`},
	} {
		if err := tc.in.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}
