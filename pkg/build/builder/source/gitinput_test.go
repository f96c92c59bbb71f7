package source

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestCheckGitURI(t *testing.T) {
	for _, tt := range []struct {
		uri       string
		allowFile bool
		wantErr   string // "" = allowed
	}{
		{uri: "https://github.com/org/app.git"},
		{uri: "HTTP://git.example.com/app"},
		{uri: "ssh://git@git.example.com:2222/org/app.git"},
		{uri: "git://git.example.com/app"},
		{uri: "git+ssh://git@git.example.com/app"},
		{uri: "git@github.com:org/app.git"},
		{uri: "https://ada:s3cret@git.example.com/app.git"},
		{uri: "", wantErr: "empty"},
		{uri: "--upload-pack=touch /tmp/pwned", wantErr: `starts with "-"`},
		{uri: "-oProxyCommand=sh", wantErr: `starts with "-"`},
		{uri: "ext::sh -c touch% /tmp/pwned", wantErr: "spaces or control"},
		{uri: "ext::sh", wantErr: "remote helper"},
		{uri: "fd::3", wantErr: "remote helper"},
		{uri: "file:///srv/git/app", wantErr: "local repository (file://)"},
		{uri: "file:///srv/git/app", allowFile: true},
		{uri: "/srv/git/app", wantErr: "local path"},
		{uri: "./app", wantErr: "local path"},
		{uri: "/srv/git/app", allowFile: true},
		{uri: "ftp://git.example.com/app", wantErr: "scheme ftp"},
		{uri: "https://git.example.com/app\nx", wantErr: "control"},
		{uri: "https://ada:s3cret@git.example.com/app.git\t", wantErr: "https://redacted@git.example.com/app.git"},
	} {
		err := CheckGitURI(tt.uri, tt.allowFile)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckGitURI(%q, %v) = %v, want allowed", tt.uri, tt.allowFile, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckGitURI(%q, %v) = %v, want an error saying %q", tt.uri, tt.allowFile, err, tt.wantErr)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("CheckGitURI(%q) error %q shows the password", tt.uri, err)
		}
	}
}

func TestCheckGitRef(t *testing.T) {
	for _, ok := range []string{"", "main", "v1.2.3", "refs/heads/feature/x", "refs/pull/12/head", "0123abcd", "release-1.0"} {
		if err := CheckGitRef(ok); err != nil {
			t.Errorf("CheckGitRef(%q) = %v, want allowed", ok, err)
		}
	}
	for ref, want := range map[string]string{
		"--upload-pack=touch /tmp/pwned": `starts with "-"`,
		"-b":                             `starts with "-"`,
		"main branch":                    "character",
		"main\x00":                       "character",
		"a:b":                            "character",
		"HEAD~1":                         "character",
		"main..other":                    "check-ref-format",
		"main@{1}":                       "check-ref-format",
		"feature/":                       "check-ref-format",
	} {
		if err := CheckGitRef(ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckGitRef(%q) = %v, want an error saying %q", ref, err, want)
		}
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"https://ada:s3cret@git.example.com/app.git":  "https://ada:redacted@git.example.com/app.git",
		"https://ghp_TOKEN123@github.com/org/app.git": "https://redacted@github.com/org/app.git",
		"https://git.example.com/app.git":             "https://git.example.com/app.git",
		"ssh://git@git.example.com/app.git":           "ssh://git@git.example.com/app.git",
		"ssh://git:pw12@git.example.com/app.git":      "ssh://git:redacted@git.example.com/app.git",
		"git@github.com:org/app.git":                  "git@github.com:org/app.git",
		"https://ada:s3%zzcret@git.example.com/app":   "https://redacted@git.example.com/app",
		"/srv/git/app": "/srv/git/app",
	} {
		if got := RedactURI(in); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFetchGitRefusesOptions is the attack of a ref (or revision) that git
// would read as an option: --upload-pack=<command> makes git run the
// command in the builder, outside the build's chroot. The fetch fails
// saying why and the command never runs, also where local repositories are
// allowed (the upload-pack of a local repository runs locally).
func TestFetchGitRefusesOptions(t *testing.T) {
	repo, _, _ := gitRepo(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	attack := "--upload-pack=touch " + marker + ";git-upload-pack"
	for name, opts := range map[string]Options{
		"ref":      {Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "file://" + repo, Ref: attack}}},
		"revision": {Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "file://" + repo}}, Revision: &buildv1.SourceRevision{Git: &buildv1.GitSourceRevision{Commit: attack}}},
		"uri":      {Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: attack}}},
	} {
		t.Run(name, func(t *testing.T) {
			opts.AllowFileGitURIs = true
			var out strings.Builder
			opts.Out = &out
			_, err := Fetch(context.Background(), opts, t.TempDir())
			if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(err.Error(), `starts with "-"`) {
				t.Errorf("err = %v, want FetchSourceFailed saying the ref or URI starts with \"-\"", err)
			}
			if _, serr := os.Stat(marker); serr == nil {
				t.Fatalf("git ran the command of %s\n%s", attack, out.String())
			}
		})
	}
	// The "--" before git's positional arguments holds on its own: the ref
	// reaches git fetch as a refspec, never as an option.
	g := &gitRun{dir: t.TempDir(), out: &strings.Builder{}, env: []string{"GIT_ALLOW_PROTOCOL=file"}}
	if _, err := g.run(context.Background(), "init", "-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.run(context.Background(), "fetch", "-q", "--depth=1", "--", "file://"+repo, attack); err == nil {
		t.Error("git fetch took the attack as a refspec that exists")
	}
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatalf("git fetch -- <uri> %s ran the command", attack)
	}
}

// TestFetchGitFileTransport: local repositories (file:// or a path) are
// refused unless allowed, for the repository and for its submodules (git
// itself refuses the file transport: GIT_ALLOW_PROTOCOL).
func TestFetchGitFileTransport(t *testing.T) {
	repo, _, _ := gitRepo(t)
	for _, uri := range []string{"file://" + repo, repo} {
		_, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: uri}}}, t.TempDir())
		if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(err.Error(), "does not allow") {
			t.Errorf("fetching %s: err = %v, want FetchSourceFailed saying local repositories are not allowed", uri, err)
		}
	}

	// A repository served over HTTP whose submodule is a local path.
	sub, _, _ := gitRepo(t)
	top, _, _ := gitRepo(t)
	gitIn(t, top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "vendored")
	gitIn(t, top, "commit", "-q", "-m", "add a submodule")
	url := gitHTTPServer(t, filepath.Dir(top), "ada", "s3cret") + "/" + filepath.Base(top) + "/.git"
	var out strings.Builder
	_, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: url}},
		SecretDir: secretFiles(t, map[string]string{"username": "ada", "password": "s3cret"}), Out: &out}, t.TempDir())
	if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(err.Error(), "transport 'file' not allowed") {
		t.Errorf("err = %v, want the submodule's file transport refused\n%s", err, out.String())
	}
}

// TestFetchGitURICredentials: credentials in the URI reach git through
// GIT_ASKPASS, never in its command line, its messages, the build log, the
// error (the status message) or the repository's .git/config (which is
// part of the build context).
func TestFetchGitURICredentials(t *testing.T) {
	repo, _, second := gitRepo(t)
	server := gitHTTPServer(t, filepath.Dir(repo), "ada", "s3cret-pw")
	path := "/" + filepath.Base(repo) + "/.git"
	hostPart := strings.TrimPrefix(server, "http://")

	t.Run("right credentials", func(t *testing.T) {
		var out strings.Builder
		dir := t.TempDir()
		got, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{
			URI: "http://ada:s3cret-pw@" + hostPart + path, Ref: "main"}}, Out: &out}, dir)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if got.Revision.Git.Commit != second {
			t.Errorf("commit %s, want %s", got.Revision.Git.Commit, second)
		}
		if !strings.Contains(out.String(), "http://ada:redacted@"+hostPart+path) || strings.Contains(out.String(), "s3cret-pw") {
			t.Errorf("the log does not show the URI redacted:\n%s", out.String())
		}
		if cfg := readFile(t, filepath.Join(dir, ".git", "config")); strings.Contains(cfg, "s3cret-pw") {
			t.Errorf(".git/config holds the password:\n%s", cfg)
		}
	})
	for name, uri := range map[string]string{
		"wrong password":        "http://ada:wr0ng-pw@" + hostPart + path,
		"token as the user":     "http://tok3n-value@" + hostPart + path,
		"missing repository":    "http://ada:wr0ng-pw@" + hostPart + "/missing/.git",
		"unreachable host":      "http://ada:wr0ng-pw@127.0.0.1:1/app.git",
		"refused before git":    "http://ada:wr0ng-pw@" + hostPart + path + " ",
		"ref refused before it": "http://ada:wr0ng-pw@" + hostPart + path,
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			ref := "main"
			if name == "ref refused before it" {
				ref = "-x"
			}
			_, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: uri, Ref: ref}}, Out: &out}, t.TempDir())
			if reasonOf(err) != buildv1.StatusReasonFetchSourceFailed {
				t.Fatalf("err = %v, want FetchSourceFailed", err)
			}
			for _, secret := range []string{"wr0ng-pw", "tok3n-value"} {
				if strings.Contains(err.Error(), secret) || strings.Contains(out.String(), secret) {
					t.Errorf("%q shows in the error %q or the log:\n%s", secret, err, out.String())
				}
			}
		})
	}
}

// TestFetchGitSSHWithoutKnownHosts: an ssh key without known_hosts makes
// git accept any host key, and the build log says so.
func TestFetchGitSSHWithoutKnownHosts(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"without known_hosts": {"ssh-privatekey": "KEY"},
		"with known_hosts":    {"ssh-privatekey": "KEY", "known_hosts": "host ssh-ed25519 AAAA"},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			_, _ = Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "ssh://git@127.0.0.1:1/app.git"}},
				SecretDir: secretFiles(t, files), Out: &out}, t.TempDir())
			warned := strings.Contains(out.String(), "no known_hosts: the git server's host key is accepted without being checked")
			if want := files["known_hosts"] == ""; warned != want {
				t.Errorf("warning in the log = %v, want %v:\n%s", warned, want, out.String())
			}
		})
	}
}

func secretFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func gitIn(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Bob", "GIT_COMMITTER_EMAIL=bob@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
