package binary

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// extracted lists the files and links a builder gets from the Build's
// binary input.
func (h *harness) extracted(b *buildv1.Build) []string {
	h.t.Helper()
	dir, err := h.fetchAsBuilder(b)
	if err != nil {
		h.t.Fatal(err)
	}
	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func writeTree(t *testing.T, dir string, files map[string]string) {
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

// TestFromDirLeavesOut: --from-dir uploads neither .git (as oc
// start-build --from-dir) nor what the build context's .dockerignore
// excludes (its exceptions honoured, the Dockerfile and the ignore file
// always sent), for the BuildConfig's contextDir; --build-arg and
// --no-cache reach the binary build.
func TestFromDirLeavesOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "from-dir-ignore")
	bc := h.buildConfig("app", false)
	bc.Spec.Source.ContextDir = "app"
	if err := testBed.Client.Update(h.ctx, bc); err != nil {
		t.Fatal(err)
	}
	alice := h.user("alice", "archway:build-starter")
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".git/config": "[core]\n", "README.md": "readme", ".dockerignore": "README.md\n",
		"app/Dockerfile": "FROM scratch\nCOPY . /\n", "app/.dockerignore": "*.env\nlogs/\n!logs/keep.log\nDockerfile\n",
		"app/main.go": "package main\n", "app/prod.env": "TOKEN=s3cr3t\n", "app/logs/debug.log": "d", "app/logs/keep.log": "k",
		"app/vendor/lib/.git": "gitdir: elsewhere\n", "app/vendor/lib/lib.go": "package lib\n",
	})
	out, err := h.plugin(alice, "start-build", "app", "--from-dir", dir, "--build-arg", "GO=1.26", "--no-cache")
	if err != nil || out != "build.build.openshift.io/app-1 started\n" {
		t.Fatalf("start-build --from-dir: %v, %q", err, out)
	}
	b := h.build("app-1")
	want := []string{".dockerignore", "README.md", "app/.dockerignore", "app/Dockerfile", "app/logs/keep.log", "app/main.go", "app/vendor/lib/lib.go"}
	if got := h.extracted(b); !slices.Equal(got, want) {
		t.Errorf("uploaded %v\nwant     %v", got, want)
	}
	ds := b.Spec.Strategy.DockerStrategy
	if len(ds.BuildArgs) != 1 || ds.BuildArgs[0].Name != "GO" || ds.BuildArgs[0].Value != "1.26" || !ds.NoCache {
		t.Errorf("app-1's docker strategy: %+v", ds)
	}
}

// TestFromRepo: --from-repo uploads the files of a commit of a local Git
// repository (not the uncommitted changes, not .git), submodules
// included, and records the commit, its author and message; --commit
// picks another commit; a directory outside a repository is refused.
func TestFromRepo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "from-repo")
	h.buildConfig("app", false)
	alice := h.user("alice", "archway:build-starter")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(h.ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ann Author", "GIT_AUTHOR_EMAIL=ann@example.com",
			"GIT_COMMITTER_NAME=Carl Committer", "GIT_COMMITTER_EMAIL=carl@example.com", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=protocol.file.allow", "GIT_CONFIG_VALUE_0=always")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	lib := t.TempDir()
	git(lib, "init", "-q", "-b", "main")
	writeTree(t, lib, map[string]string{"lib.go": "package lib\n"})
	git(lib, "add", ".")
	git(lib, "commit", "-q", "-m", "lib")

	repo := t.TempDir()
	git(repo, "init", "-q", "-b", "main")
	writeTree(t, repo, map[string]string{"Dockerfile": "FROM scratch\n", "v1.txt": "one\n"})
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "first")
	first := git(repo, "rev-parse", "HEAD")
	writeTree(t, repo, map[string]string{"v2.txt": "two\n"})
	git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "second\n\nwith a body")
	second := git(repo, "rev-parse", "HEAD")
	writeTree(t, repo, map[string]string{"uncommitted.txt": "not in a commit\n", "v1.txt": "changed, not committed\n"})

	out, err := h.plugin(alice, "start-build", "app", "--from-repo", repo)
	if err != nil || !strings.HasSuffix(out, "build.build.openshift.io/app-1 started\n") {
		t.Fatalf("start-build --from-repo: %v, %q", err, out)
	}
	b := h.build("app-1")
	if got, want := h.extracted(b), []string{".gitmodules", "Dockerfile", "v1.txt", "v2.txt", "vendor/lib/lib.go"}; !slices.Equal(got, want) {
		t.Errorf("uploaded %v, want %v", got, want)
	}
	if dir, _ := h.fetchAsBuilder(b); readFile(t, filepath.Join(dir, "v1.txt")) != "one\n" {
		t.Error("v1.txt is the uncommitted change, not the commit's")
	}
	r := b.Spec.Revision
	if r == nil || r.Git.Commit != second || r.Git.Author.Name != "Ann Author" || r.Git.Author.Email != "ann@example.com" ||
		r.Git.Committer.Name != "Carl Committer" || r.Git.Message != "second\n\nwith a body" {
		t.Errorf("app-1's revision: %+v", r)
	}

	out, err = h.plugin(alice, "start-build", "app", "--from-repo", repo, "--commit", first[:10], "-o", "name")
	if err != nil || out != "build.build.openshift.io/app-2\n" {
		t.Fatalf("start-build --from-repo --commit: %v, %q", err, out)
	}
	b = h.build("app-2")
	if got, want := h.extracted(b), []string{"Dockerfile", "v1.txt"}; !slices.Equal(got, want) || b.Spec.Revision.Git.Commit != first {
		t.Errorf("app-2: uploaded %v (want %v), commit %s (want %s)", got, want, b.Spec.Revision.Git.Commit, first)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-repo", t.TempDir()}, "is not in a Git repository"},
		{[]string{"--from-repo", repo, "--commit", "nope"}, "--commit nope: not a commit of"},
		{[]string{"--from-repo", repo, "--commit", "--upload-pack=x"}, `--commit "--upload-pack=x" is not a commit`},
		{[]string{"--from-repo", repo, "--from-dir", repo}, "give one of --from-dir, --from-file, --from-archive and --from-repo"},
	} {
		if _, err := h.plugin(alice, append([]string{"start-build", "app"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// A binary build is not run again: its input goes when it ends.
	if _, err := h.plugin(alice, "start-build", "--from-build", "app-1"); err == nil || !strings.Contains(err.Error(), "is a binary build, whose input is not kept once it ends") {
		t.Errorf("--from-build of a binary build: %v", err)
	}
	if names := h.builds(); len(names) != 2 {
		t.Errorf("builds %v after the refused starts, want app-1 and app-2", names)
	}
}
