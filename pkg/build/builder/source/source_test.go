package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// gitRepo makes a repository with two commits on main (a tag v1 on the
// first) and a branch "other"; it returns its path and the commits.
func gitRepo(t testing.TB) (dir string, first, second string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed: %v (make tools installs it)", err)
	}
	dir = t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
			"GIT_COMMITTER_NAME=Bob", "GIT_COMMITTER_EMAIL=bob@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write("Dockerfile", "FROM first\n")
	write("app/Dockerfile", "FROM app-first\n")
	git("add", ".")
	git("commit", "-q", "-m", "first commit")
	first = git("rev-parse", "HEAD")
	git("tag", "v1")
	write("Dockerfile", "FROM second\n")
	write("app/Dockerfile", "FROM app-second\n")
	write("app/Containerfile.alt", "FROM alt\n")
	git("add", ".")
	git("commit", "-q", "-m", "second commit\n\nwith a body")
	second = git("rev-parse", "HEAD")
	git("branch", "other", first)
	return dir, first, second
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func reasonOf(err error) buildv1.StatusReason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestFetchGit(t *testing.T) {
	repo, first, second := gitRepo(t)
	tests := []struct {
		name           string
		uri, ref       string
		contextDir     string
		dockerfilePath string
		revision       string
		wantFrom       string
		wantCommit     string
	}{
		{name: "default branch", uri: repo, wantFrom: "FROM second", wantCommit: second},
		{name: "file URL", uri: "file://" + repo, ref: "main", wantFrom: "FROM second", wantCommit: second},
		{name: "branch", uri: repo, ref: "other", wantFrom: "FROM first", wantCommit: first},
		{name: "tag", uri: repo, ref: "v1", wantFrom: "FROM first", wantCommit: first},
		{name: "commit", uri: "file://" + repo, ref: first, wantFrom: "FROM first", wantCommit: first},
		{name: "abbreviated commit", uri: "file://" + repo, ref: first[:10], wantFrom: "FROM first", wantCommit: first},
		{name: "contextDir", uri: repo, ref: "main", contextDir: "app", wantFrom: "FROM app-second", wantCommit: second},
		{name: "contextDir and dockerfilePath", uri: repo, contextDir: "/app/", dockerfilePath: "Containerfile.alt", wantFrom: "FROM alt", wantCommit: second},
		{name: "the Build's revision wins over ref", uri: "file://" + repo, ref: "main", revision: first, wantFrom: "FROM first", wantCommit: first},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{AllowFileGitURIs: true,
				Source: buildv1.BuildSource{
					Git:        &buildv1.GitBuildSource{URI: tt.uri, Ref: tt.ref},
					ContextDir: tt.contextDir,
				},
				DockerfilePath: tt.dockerfilePath,
			}
			if tt.revision != "" {
				opts.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: tt.revision}}
			}
			got, err := Fetch(context.Background(), opts, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if from := strings.TrimSpace(readFile(t, got.Dockerfile)); from != tt.wantFrom {
				t.Errorf("Dockerfile says %q, want %q", from, tt.wantFrom)
			}
			if got.Revision == nil || got.Revision.Git == nil || got.Revision.Git.Commit != tt.wantCommit {
				t.Fatalf("revision = %+v, want commit %s", got.Revision, tt.wantCommit)
			}
			if g := got.Revision.Git; g.Author.Name != "Ada" || g.Author.Email != "ada@example.com" || g.Committer.Name != "Bob" {
				t.Errorf("revision people = %+v", g)
			}
			if !strings.HasPrefix(got.ContextDir, got.Root) {
				t.Errorf("context %s is not inside %s", got.ContextDir, got.Root)
			}
		})
	}
}

func TestFetchGitFailures(t *testing.T) {
	repo, _, _ := gitRepo(t)
	tests := []struct {
		name       string
		src        buildv1.BuildSource
		dockerfile string
		wantReason buildv1.StatusReason
		wantMsg    string
	}{
		{
			name:       "no such repository",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: filepath.Join(repo, "missing")}},
			wantReason: buildv1.StatusReasonFetchSourceFailed,
			wantMsg:    "does not appear to be a git repository",
		},
		{
			name:       "no such ref",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo, Ref: "nope"}},
			wantReason: buildv1.StatusReasonFetchSourceFailed,
			wantMsg:    "couldn't find remote ref nope",
		},
		{
			name:       "unreachable host",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "http://127.0.0.1:1/repo.git"}},
			wantReason: buildv1.StatusReasonFetchSourceFailed,
			wantMsg:    "127.0.0.1",
		},
		{
			name:       "missing contextDir",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo}, ContextDir: "nope"},
			wantReason: buildv1.StatusReasonInvalidContextDirectory,
			wantMsg:    `contextDir "nope" does not exist`,
		},
		{
			name:       "contextDir is a file",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo}, ContextDir: "Dockerfile"},
			wantReason: buildv1.StatusReasonInvalidContextDirectory,
			wantMsg:    "not a directory",
		},
		{
			name:       "contextDir leaving the source stays in it",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo}, ContextDir: "../../etc"},
			wantReason: buildv1.StatusReasonInvalidContextDirectory,
			wantMsg:    "does not exist",
		},
		{
			name:       "missing Dockerfile",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo}, ContextDir: "app"},
			dockerfile: "nope/Dockerfile",
			wantReason: buildv1.StatusReasonManageDockerfileFailed,
			wantMsg:    `no Dockerfile "nope/Dockerfile" in contextDir "app"`,
		},
		{
			name:       "dockerfilePath leaving the context",
			src:        buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: repo}, ContextDir: "app"},
			dockerfile: "../Dockerfile",
			wantReason: buildv1.StatusReasonManageDockerfileFailed,
			wantMsg:    "inside the context directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Fetch(context.Background(), Options{AllowFileGitURIs: true, Source: tt.src, DockerfilePath: tt.dockerfile}, t.TempDir())
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			if got := reasonOf(err); got != tt.wantReason {
				t.Errorf("reason = %q, want %q (%v)", got, tt.wantReason, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestInlineDockerfile(t *testing.T) {
	repo, _, _ := gitRepo(t)
	inline := "FROM inline\n"
	t.Run("alone", func(t *testing.T) {
		got, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Dockerfile: &inline}}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if readFile(t, got.Dockerfile) != inline || got.Revision != nil {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("replaces the repository's", func(t *testing.T) {
		got, err := Fetch(context.Background(), Options{AllowFileGitURIs: true, Source: buildv1.BuildSource{
			Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: repo}, Dockerfile: &inline, ContextDir: "app",
		}}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got.Dockerfile != filepath.Join(got.ContextDir, "Dockerfile") || readFile(t, got.Dockerfile) != inline {
			t.Errorf("Dockerfile %s says %q", got.Dockerfile, readFile(t, got.Dockerfile))
		}
	})
}

// gitHTTPServer serves the repositories under root with git http-backend,
// requiring basic auth user:password.
func gitHTTPServer(t *testing.T, root, user, password string) string {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend is not installed: %v (it comes with git, which make tools installs)", err)
	}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFetchGitBasicAuth(t *testing.T) {
	repo, _, second := gitRepo(t)
	url := gitHTTPServer(t, filepath.Dir(repo), "ada", "s3cret") + "/" + filepath.Base(repo) + "/.git"
	secret := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	src := buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: url, Ref: "main"}}

	t.Run("right credentials", func(t *testing.T) {
		got, err := Fetch(context.Background(), Options{Source: src,
			SecretDir: secret(t, map[string]string{"username": "ada", "password": "s3cret"})}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got.Revision.Git.Commit != second {
			t.Errorf("commit %s, want %s", got.Revision.Git.Commit, second)
		}
	})
	for name, files := range map[string]map[string]string{
		"wrong password": {"username": "ada", "password": "nope"},
		"no secret":      nil,
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{Source: src}
			if files != nil {
				opts.SecretDir = secret(t, files)
			}
			_, err := Fetch(context.Background(), opts, t.TempDir())
			if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed {
				t.Fatalf("err = %v, want FetchSourceFailed", err)
			}
			if !strings.Contains(err.Error(), "Authentication failed") && !strings.Contains(err.Error(), "could not read Username") {
				t.Errorf("error %q does not carry git's word on authentication", err)
			}
			if strings.Contains(err.Error(), "nope") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestGitCredentials(t *testing.T) {
	secretDir := t.TempDir()
	for name, content := range map[string]string{
		"ssh-privatekey": "KEY", "known_hosts": "host ssh-ed25519 AAAA", "ca.crt": "CA", ".gitconfig": "[user]\n",
	} {
		if err := os.WriteFile(filepath.Join(secretDir, name), []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg, err := gitCredentials(secretDir, dir, "https://git.example.com")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(cfg.env, "\n")
	for _, want := range []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_COMMAND=ssh -i '" + filepath.Join(dir, "ssh-privatekey") + "' -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile='" + filepath.Join(secretDir, "known_hosts") + "'",
		"GIT_CONFIG_GLOBAL=" + filepath.Join(secretDir, ".gitconfig"),
	} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	if strings.Join(cfg.args, " ") != "-c http.sslCAInfo="+filepath.Join(secretDir, "ca.crt") {
		t.Errorf("args = %q", cfg.args)
	}
	info, err := os.Stat(filepath.Join(dir, "ssh-privatekey"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key copy: %v %v", info, err)
	}
}

func tarball(t *testing.T, entries []tar.Header, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = tar.NewWriter(zw)
	} else {
		w = tar.NewWriter(&buf)
	}
	for _, h := range entries {
		body := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
			body = h.Name
		}
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			body = ""
		}
		if err := w.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := w.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestFetchBinary(t *testing.T) {
	entries := []tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "Dockerfile", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "sub/file", Typeflag: tar.TypeReg, Mode: 0o600},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "sub/file"},
	}
	var zipBuf bytes.Buffer
	zw := zip.NewWriter(&zipBuf)
	for _, name := range []string{"Dockerfile", "sub/file"} {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write([]byte(name))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, archive := range map[string][]byte{
		"tar":    tarball(t, entries, false),
		"tar.gz": tarball(t, entries, true),
		"zip":    zipBuf.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Fetch(context.Background(), Options{
				Source: buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}},
				Binary: bytes.NewReader(archive),
			}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if readFile(t, got.Dockerfile) != "Dockerfile" || readFile(t, filepath.Join(got.ContextDir, "sub/file")) != "sub/file" {
				t.Error("archive content not extracted")
			}
		})
	}
	t.Run("asFile", func(t *testing.T) {
		df := "FROM x\n"
		got, err := Fetch(context.Background(), Options{
			Source: buildv1.BuildSource{Binary: &buildv1.BinaryBuildSource{AsFile: "app.jar"}, Dockerfile: &df},
			Binary: strings.NewReader("JAR"),
		}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if readFile(t, filepath.Join(got.ContextDir, "app.jar")) != "JAR" {
			t.Error("asFile not written")
		}
	})
	for name, bad := range map[string][]tar.Header{
		"dot-dot":               {{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"through a symlink out": {{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "out/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Fetch(context.Background(), Options{
				Source: buildv1.BuildSource{Binary: &buildv1.BinaryBuildSource{}},
				Binary: bytes.NewReader(tarball(t, bad, false)),
			}, dir)
			if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed {
				t.Fatalf("err = %v, want FetchSourceFailed", err)
			}
			if _, err := os.Stat("/tmp/escape"); err == nil {
				t.Error("an entry was written outside the directory")
			}
		})
	}
	t.Run("no input", func(t *testing.T) {
		_, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Binary: &buildv1.BinaryBuildSource{}}}, t.TempDir())
		if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestType(t *testing.T) {
	df := "FROM x"
	for _, tt := range []struct {
		src  buildv1.BuildSource
		want buildv1.BuildSourceType
	}{
		{buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "u"}, Dockerfile: &df}, buildv1.BuildSourceGit},
		{buildv1.BuildSource{Binary: &buildv1.BinaryBuildSource{}}, buildv1.BuildSourceBinary},
		{buildv1.BuildSource{Dockerfile: &df}, buildv1.BuildSourceDockerfile},
		{buildv1.BuildSource{}, buildv1.BuildSourceNone},
		{buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Git: &buildv1.GitBuildSource{}}, buildv1.BuildSourceBinary},
	} {
		if got := Type(tt.src); got != tt.want {
			t.Errorf("Type(%+v) = %s, want %s", tt.src, got, tt.want)
		}
	}
}

func TestFetchCopiesSecretsAndConfigMaps(t *testing.T) {
	// Mounted the way the kubelet mounts them: keys link into ..data.
	mount := func(t *testing.T, dir string, files map[string]string) {
		data := filepath.Join(dir, "..2026_11_22")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..2026_11_22", filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(data, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	secrets, configs := t.TempDir(), t.TempDir()
	mount(t, filepath.Join(secrets, "creds"), map[string]string{"token": "T"})
	mount(t, filepath.Join(configs, "settings"), map[string]string{"app.conf": "C"})
	df := "FROM x\n"
	src := buildv1.BuildSource{
		Dockerfile: &df,
		Secrets:    []buildv1.SecretBuildSource{{Secret: corev1.LocalObjectReference{Name: "creds"}, DestinationDir: "secrets"}},
		ConfigMaps: []buildv1.ConfigMapBuildSource{{ConfigMap: corev1.LocalObjectReference{Name: "settings"}}},
	}
	got, err := Fetch(context.Background(), Options{AllowFileGitURIs: true, Source: src, SecretsDir: secrets, ConfigMapsDir: configs}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(got.ContextDir, "secrets/token")) != "T" || readFile(t, filepath.Join(got.ContextDir, "app.conf")) != "C" {
		t.Error("inputs not copied")
	}
	if info, err := os.Lstat(filepath.Join(got.ContextDir, "secrets/token")); err != nil || !info.Mode().IsRegular() {
		t.Errorf("copy is not a plain file: %v %v", info, err)
	}

	src.Secrets[0].Secret.Name = "missing"
	_, err = Fetch(context.Background(), Options{AllowFileGitURIs: true, Source: src, SecretsDir: secrets, ConfigMapsDir: configs}, t.TempDir())
	if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(err.Error(), "secret missing is not mounted") {
		t.Errorf("err = %v", err)
	}
}

// TestFetchBinaryLimits: a binary input over the size limit (as streamed,
// or once extracted: a decompression bomb), or with more entries than the
// limit, fails saying which limit, for tar, tar.gz and zip.
func TestFetchBinaryLimits(t *testing.T) {
	many := []tar.Header{}
	for i := range 20 {
		many = append(many, tar.Header{Name: fmt.Sprintf("f%02d", i), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	// 1 MiB of zeros compresses to about 1 KiB.
	var bomb bytes.Buffer
	{
		zw := gzip.NewWriter(&bomb)
		tw := tar.NewWriter(zw)
		_ = tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20})
		_, _ = tw.Write(make([]byte, 1<<20))
		_ = tw.Close()
		_ = zw.Close()
	}
	zipOf := func(n, size int) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i := range n {
			f, err := zw.Create(fmt.Sprintf("f%02d", i))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write(make([]byte, size))
		}
		_ = zw.Close()
		return buf.Bytes()
	}
	limits := ArchiveLimits{MaxBytes: 64 << 10, MaxEntries: 10}
	for _, tt := range []struct {
		name    string
		input   []byte
		asFile  string
		wantErr string
	}{
		{name: "tar with too many entries", input: tarball(t, many, false), wantErr: "more than 10 entries"},
		{name: "tar.gz with too many entries", input: tarball(t, many, true), wantErr: "more than 10 entries"},
		{name: "zip with too many entries", input: zipOf(20, 1), wantErr: "more than 10 entries"},
		{name: "tar.gz bomb", input: bomb.Bytes(), wantErr: "extracts to more than 65536 bytes"},
		{name: "zip bomb", input: zipOf(1, 1<<20), wantErr: "extracts to more than 65536 bytes"},
		{name: "asFile too large", input: make([]byte, 100<<10), asFile: "app.jar", wantErr: "larger than 65536 bytes"},
		{name: "zip stream too large (kept on disk to be read)", input: append(zipOf(1, 1), make([]byte, 100<<10)...), wantErr: "larger than 65536 bytes"},
		{name: "within the limits", input: tarball(t, many[:10], true)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Fetch(context.Background(), Options{
				Source:        buildv1.BuildSource{Binary: &buildv1.BinaryBuildSource{AsFile: tt.asFile}, Dockerfile: ptrTo("FROM x\n")},
				Binary:        bytes.NewReader(tt.input),
				ArchiveLimits: limits,
			}, t.TempDir())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tt.wantErr != "" && (reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want FetchSourceFailed saying %q", err, tt.wantErr)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
