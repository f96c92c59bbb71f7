package source

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestFetchGitProcesses counts the git processes a fetch runs: each one
// costs CPU that a build's platform pods share. git on PATH is a script
// that logs the command before running the real git; GIT_TRACE2_EVENT
// logs every git process, the ones git starts itself included.
func TestFetchGitProcesses(t *testing.T) {
	repo, first, _ := gitRepo(t)
	withSub, _, _ := gitRepo(t)
	gitIn(t, withSub, "-c", "protocol.file.allow=always", "submodule", "add", "-q", repo, "vendored")
	gitIn(t, withSub, "commit", "-q", "-m", "add a submodule")

	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>" + shellQuote(calls) + "\nexec " + shellQuote(real) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	trace := filepath.Join(t.TempDir(), "trace2")
	t.Setenv("GIT_TRACE2_EVENT", trace)

	for _, tt := range []struct {
		name, uri, ref string
		want           []string
	}{
		{name: "branch", uri: "file://" + repo, ref: "main", want: []string{"init", "fetch", "log", "checkout"}},
		{name: "default branch", uri: "file://" + repo, want: []string{"init", "fetch", "log", "checkout"}},
		// An abbreviated hash is no ref: the shallow fetch of it fails
		// and everything is fetched.
		{name: "abbreviated commit", uri: "file://" + repo, ref: first[:12], want: []string{"init", "fetch", "fetch", "log", "checkout"}},
		{name: "submodules", uri: "file://" + withSub, want: []string{"init", "fetch", "log", "checkout", "submodule"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []string{calls, trace} {
				if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			opts := Options{AllowFileGitURIs: true, Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: tt.uri, Ref: tt.ref}}}
			if _, err := Fetch(context.Background(), opts, t.TempDir()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(readFile(t, calls)), "\n") {
				args := strings.Fields(line)
				got = append(got, gitCommand(args))
				// checkout takes no "--" before its commit: it must be
				// given a full hash, never a name git could read otherwise.
				if gitCommand(args) == "checkout" && !fullHash.MatchString(args[len(args)-1]) {
					t.Errorf("git checkout was given %q, not a commit's full hash", args[len(args)-1])
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("git commands %q, want %q", got, tt.want)
			}
			all := traceStarts(t, trace)
			for _, argv := range all {
				if slices.Contains(argv, "maintenance") || slices.Contains(argv, "gc") {
					t.Errorf("git ran %q after the fetch", argv)
				}
			}
			t.Logf("%d git commands, %d git processes in all (the local repository's upload-pack included)", len(got), len(all))
		})
	}
}

// gitCommand returns the git command args run: the first argument after
// git's -c options.
func gitCommand(args []string) string {
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" {
			i++
			continue
		}
		return args[i]
	}
	return ""
}

// traceStarts returns the argv of every git process a GIT_TRACE2_EVENT
// file records.
func traceStarts(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var starts [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Event string   `json:"event"`
			Argv  []string `json:"argv"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("trace2 line %q: %v", sc.Text(), err)
		}
		if ev.Event == "start" {
			starts = append(starts, ev.Argv)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return starts
}

// TestFetchGitRelativeSubmodules: submodule URLs relative to the
// superproject's (OpenShift's builder clones them so) resolve against the
// Build's URI, at every level: a nested submodule's relative URL resolves
// against its own parent's URL. The repositories are served over HTTP with
// basic auth, the credentials given in the Build's URI: they reach the
// submodules through the askpass program and stay out of .git/config.
func TestFetchGitRelativeSubmodules(t *testing.T) {
	root := t.TempDir()
	// root/top (superproject), root/deep/mid (its submodule, "../deep/mid"),
	// root/deep/inner (mid's submodule, "../inner"): resolved against
	// top's URL instead of mid's, inner's URL names root/inner, which does
	// not exist.
	inner := filepath.Join(root, "deep", "inner")
	mid := filepath.Join(root, "deep", "mid")
	top := filepath.Join(root, "top")
	commitFiles(t, inner, map[string]string{"inner.txt": "inner\n"})
	commitFiles(t, mid, map[string]string{"mid.txt": "mid\n"})
	addSubmodule(t, mid, inner, "inner", "../inner")
	commitFiles(t, top, map[string]string{"Dockerfile": "FROM top\n"})
	addSubmodule(t, top, mid, "mid", "../deep/mid")

	server := gitHTTPServer(t, root, "ada", "s3cret-pw")
	uri := strings.Replace(server, "http://", "http://ada:s3cret-pw@", 1) + "/top"
	var out strings.Builder
	dir := t.TempDir()
	got, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: uri}}, Out: &out}, dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got.Revision == nil || !fullHash.MatchString(got.Revision.Git.Commit) {
		t.Errorf("revision %+v", got.Revision)
	}
	for name, want := range map[string]string{"mid/mid.txt": "mid\n", "mid/inner/inner.txt": "inner\n"} {
		if data := readFile(t, filepath.Join(dir, name)); data != want {
			t.Errorf("%s says %q, want %q", name, data, want)
		}
	}
	if cfg := readFile(t, filepath.Join(dir, ".git", "config")); strings.Contains(cfg, "s3cret-pw") || !strings.Contains(cfg, server+"/top") {
		t.Errorf(".git/config holds the password or not the URI without it:\n%s", cfg)
	}
	if strings.Contains(out.String(), "s3cret-pw") {
		t.Errorf("the log shows the password:\n%s", out.String())
	}
}

// commitFiles makes dir a repository with one commit on main holding
// files.
func commitFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "init", "-q", "-b", "main")
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-q", "-m", "files")
}

// addSubmodule adds the repository sub to dir at path, recorded with the
// relative URL url, and commits it.
func addSubmodule(t *testing.T, dir, sub, path, url string) {
	t.Helper()
	gitIn(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, path)
	gitIn(t, dir, "config", "-f", ".gitmodules", "submodule."+path+".url", url)
	gitIn(t, dir, "add", ".gitmodules")
	gitIn(t, dir, "commit", "-q", "-m", "add "+path)
}

// BenchmarkFetchGit fetches a local repository (two commits, three files)
// as a build pod does, by branch, and prints the CPU time of the git
// processes a fetch runs (the server side of a local repository, git
// upload-pack, included) and of the fetch's own Go code.
func BenchmarkFetchGit(b *testing.B) {
	repo, _, _ := gitRepo(b)
	for _, ref := range []string{"main", ""} {
		name := "ref=" + ref
		if ref == "" {
			name = "default-branch"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{AllowFileGitURIs: true, Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "file://" + repo, Ref: ref}}}
			dirs := make([]string, b.N)
			for i := range dirs {
				dirs[i] = b.TempDir()
			}
			children, self := rusage(b, syscall.RUSAGE_CHILDREN), rusage(b, syscall.RUSAGE_SELF)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Fetch(context.Background(), opts, dirs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64((rusage(b, syscall.RUSAGE_CHILDREN)-children).Microseconds())/1000/n, "git-cpu-ms/op")
			b.ReportMetric(float64((rusage(b, syscall.RUSAGE_SELF)-self).Microseconds())/1000/n, "go-cpu-ms/op")
		})
	}
}

// rusage returns the user and system CPU time of who.
func rusage(tb testing.TB, who int) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFetchGitOrigin checks that the fetched repository has the remote
// origin a clone has: its URL exactly the Build's URI (quotes and
// backslashes in it included) and the fetched branch under
// refs/remotes/origin, for build steps that ask git where the source
// came from.
func TestFetchGitOrigin(t *testing.T) {
	repo, _, second := gitRepo(t)
	odd := filepath.Join(t.TempDir(), `a"b\c`)
	gitIn(t, filepath.Dir(odd), "clone", "-q", "--bare", repo, odd)
	uri := "file://" + odd
	dir := t.TempDir()
	opts := Options{AllowFileGitURIs: true, Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}}
	if _, err := Fetch(context.Background(), opts, dir); err != nil {
		t.Fatal(err)
	}
	read := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := read("remote", "get-url", "origin"); got != uri {
		t.Errorf("remote origin %q, want the Build's URI %q", got, uri)
	}
	if got := read("config", "--get", "remote.origin.fetch"); got != "+refs/heads/*:refs/remotes/origin/*" {
		t.Errorf("remote.origin.fetch %q", got)
	}
	if got := read("rev-parse", "refs/remotes/origin/main"); got != second {
		t.Errorf("refs/remotes/origin/main is %q, want the fetched commit %s", got, second)
	}
}

func TestCheckResolvedCommit(t *testing.T) {
	full := "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		hash, resolved string
		ok             bool
	}{
		{full[:7], full, true},
		{full, full, true},
		// A tag named like the hash, pointing at another commit.
		{full[:7], "fedcba9876543210fedcba9876543210fedcba98", false},
	} {
		if err := checkResolvedCommit(tt.hash, tt.resolved); (err == nil) != tt.ok {
			t.Errorf("checkResolvedCommit(%s, %s) = %v, want ok %v", tt.hash, tt.resolved, err, tt.ok)
		}
	}
}

// TestAddOriginRefusesSecondOrigin: as git remote add, a repository that
// has an origin already is refused rather than given a second url.
func TestAddOriginRefusesSecondOrigin(t *testing.T) {
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	if err := addOrigin(dir, "https://example.com/a.git"); err != nil {
		t.Fatal(err)
	}
	if err := addOrigin(dir, "https://example.com/b.git"); err == nil || !strings.Contains(err.Error(), "already has a remote origin") {
		t.Fatalf("second origin: %v, want refused", err)
	}
}

// TestFetchGitCredentialsStayOnHost: the credentials a Build gives for its
// repository's server (in its URI, or in its source secret) are not given
// to another server a submodule names: that server asks for a password
// and gets none, and the fetch fails.
func TestFetchGitCredentialsStayOnHost(t *testing.T) {
	root := t.TempDir()
	top := filepath.Join(root, "top")
	other := filepath.Join(t.TempDir(), "other")
	commitFiles(t, other, map[string]string{"other.txt": "other\n"})
	commitFiles(t, top, map[string]string{"Dockerfile": "FROM top\n"})

	// The other server asks every request for credentials and records
	// what it is given.
	var mu sync.Mutex
	var given []string
	otherServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); ok {
			mu.Lock()
			given = append(given, u+":"+p)
			mu.Unlock()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="other"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(otherServer.Close)
	addSubmodule(t, top, other, "other", otherServer.URL+"/other")

	server := gitHTTPServer(t, root, "ada", "s3cret-pw")
	for _, tt := range []struct {
		name      string
		uri       string
		secretDir string
	}{
		{name: "credentials in the URI", uri: strings.Replace(server, "http://", "http://ada:s3cret-pw@", 1) + "/top"},
		{name: "credentials in the source secret", uri: server + "/top", secretDir: func() string {
			dir := t.TempDir()
			for name, content := range map[string]string{"username": "ada", "password": "s3cret-pw"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o400); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			given = nil
			mu.Unlock()
			var out strings.Builder
			opts := Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: tt.uri}}, SecretDir: tt.secretDir, Out: &out}
			_, err := Fetch(context.Background(), opts, t.TempDir())
			mu.Lock()
			defer mu.Unlock()
			if len(given) > 0 {
				t.Fatalf("the submodule's server was given credentials %q", given)
			}
			// The superproject was fetched (its server took the
			// credentials); the submodule's server refused.
			if err == nil || !strings.Contains(err.Error(), "submodules") {
				t.Fatalf("fetch: %v, want the submodules' fetch to fail\n%s", err, out.String())
			}
		})
	}
}

// TestFetchGitPinnedCommitMustBeOnRef: a commit the Build names is built
// only when the source ref reaches it, however far back; a commit of
// another branch (an unreviewed one, or a fork's that the host serves) or
// one that no ref holds fails FetchSourceFailed saying so.
func TestFetchGitPinnedCommitMustBeOnRef(t *testing.T) {
	repo, first, _ := gitRepo(t)
	rev := func(name string) string {
		t.Helper()
		out, err := exec.Command("git", "-C", repo, "rev-parse", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	gitIn(t, repo, "checkout", "-q", "-b", "unreviewed")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "not on main")
	unreviewed := rev("HEAD")
	gitIn(t, repo, "checkout", "-q", "--detach")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "on no branch")
	dangling := rev("HEAD")
	gitIn(t, repo, "checkout", "-q", "main")
	// first is more than refHistoryDepth commits behind main's tip.
	for i := 0; i <= refHistoryDepth; i++ {
		gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "later")
	}
	gitIn(t, repo, "config", "uploadpack.allowAnySHA1InWant", "true")
	for _, tt := range []struct {
		name, ref, commit string
		ok                bool
	}{
		{name: "main's tip", ref: "main", commit: rev("main"), ok: true},
		{name: "an old commit of main", ref: "main", commit: first, ok: true},
		{name: "the default branch", commit: first, ok: true},
		{name: "another branch's commit", ref: "main", commit: unreviewed},
		{name: "a commit on no branch", ref: "main", commit: dangling},
		{name: "abbreviated, of another branch", ref: "main", commit: unreviewed[:12]},
		{name: "main's commit, for the other branch", ref: "unreviewed", commit: rev("main")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{AllowFileGitURIs: true,
				Source:   buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "file://" + repo, Ref: tt.ref}},
				Revision: &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: tt.commit}},
			}
			got, err := Fetch(context.Background(), opts, t.TempDir())
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(got.Revision.Git.Commit, tt.commit) {
					t.Errorf("built %s, want %s", got.Revision.Git.Commit, tt.commit)
				}
				return
			}
			if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !errors.Is(err, ErrNotOnRef) {
				t.Fatalf("err = %v, want FetchSourceFailed: not on the source ref", err)
			}
			if !strings.Contains(err.Error(), "it is not reachable from") {
				t.Errorf("message %q does not say why", err)
			}
		})
	}
}
