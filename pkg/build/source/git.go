package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// commitPattern matches what may be a commit hash (abbreviated or not): such
// a ref may need a full fetch when the server refuses to serve a commit
// that no branch or tag points at.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// gitRun runs git commands for one fetch: in the repository directory, with
// the credentials' environment and configuration.
type gitRun struct {
	dir  string
	env  []string
	args []string // -c options before every command
	out  io.Writer
}

// fetchGit fetches the repository's ref (or the Build's revision) into dir,
// shallowly when it can, checks it out with its submodules, and returns the
// commit checked out.
func fetchGit(ctx context.Context, opts Options, dir string, out io.Writer) (*buildv1.SourceRevision, error) {
	git := opts.Source.Git
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fetchFailed("git is not installed: %w", err)
	}
	credDir, err := os.MkdirTemp("", "archway-git-")
	if err != nil {
		return nil, fetchFailed("preparing git credentials: %w", err)
	}
	defer func() { _ = os.RemoveAll(credDir) }()
	cfg, err := gitCredentials(opts.SecretDir, credDir)
	if err != nil {
		return nil, fetchFailed("reading the source secret: %w", err)
	}
	g := &gitRun{dir: dir, env: append(cfg.env, proxyEnv(git.ProxyConfig)...), args: cfg.args, out: out}

	ref := git.Ref
	if opts.Revision != nil && opts.Revision.Git != nil && opts.Revision.Git.Commit != "" {
		ref = opts.Revision.Git.Commit
	}
	at := ""
	if ref != "" {
		at = " at " + ref
	}
	_, _ = fmt.Fprintf(out, "Cloning %q%s\n", git.URI, at)

	if _, err := g.run(ctx, "init", "-q"); err != nil {
		return nil, fetchFailed("git init: %w", err)
	}
	if _, err := g.run(ctx, "remote", "add", "origin", git.URI); err != nil {
		return nil, fetchFailed("git remote add: %w", err)
	}
	want := ref
	if want == "" {
		want = "HEAD"
	}
	checkout := "FETCH_HEAD"
	if _, err := g.run(ctx, "fetch", "-q", "--depth=1", "--recurse-submodules=no", "origin", want); err != nil {
		if !commitPattern.MatchString(ref) {
			return nil, fetchFailed("fetching %s from %s: %w", want, git.URI, err)
		}
		// Servers may refuse a commit that is not a branch or tag tip,
		// and an abbreviated hash is no ref at all: fetch everything.
		if _, ferr := g.run(ctx, "fetch", "-q", "--recurse-submodules=no", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"); ferr != nil {
			return nil, fetchFailed("fetching %s from %s: %w", want, git.URI, ferr)
		}
		checkout = ref
	}
	if _, err := g.run(ctx, "checkout", "-q", "--detach", checkout); err != nil {
		return nil, fetchFailed("checking out %s of %s: %w", want, git.URI, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gitmodules")); err == nil {
		if _, err := g.run(ctx, "submodule", "update", "-q", "--init", "--recursive", "--depth=1"); err != nil {
			return nil, fetchFailed("fetching the submodules of %s: %w", git.URI, err)
		}
	}
	return g.revision(ctx)
}

// revision reads the commit checked out.
func (g *gitRun) revision(ctx context.Context) (*buildv1.SourceRevision, error) {
	const sep = "\x1f"
	info, err := g.run(ctx, "log", "-1", "--format=%H"+sep+"%an"+sep+"%ae"+sep+"%cn"+sep+"%ce"+sep+"%B")
	if err != nil {
		return nil, fetchFailed("reading the commit checked out: %w", err)
	}
	f := strings.SplitN(info, sep, 6)
	if len(f) != 6 {
		return nil, fetchFailed("reading the commit checked out: unexpected git log output %q", info)
	}
	return &buildv1.SourceRevision{
		Type: buildv1.BuildSourceGit,
		Git: &buildv1.GitSourceRevision{
			Commit:    strings.TrimSpace(f[0]),
			Author:    buildv1.SourceControlUser{Name: f[1], Email: f[2]},
			Committer: buildv1.SourceControlUser{Name: f[3], Email: f[4]},
			Message:   strings.TrimSpace(f[5]),
		},
	}, nil
}

// run runs one git command and returns its standard output. An error
// carries the end of git's standard error, which says what went wrong in
// git's words.
func (g *gitRun) run(ctx context.Context, args ...string) (string, error) {
	full := append(append([]string{}, g.args...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), g.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, g.out)
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	msg := lastLines(stderr.String(), 5)
	var exitErr *exec.ExitError
	if msg == "" || !errors.As(err, &exitErr) {
		return "", err
	}
	return "", errors.New(msg)
}

// lastLines returns the last n non-empty lines of s, joined with "; ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// proxyEnv returns the proxy environment a GitBuildSource asks for.
func proxyEnv(p buildv1.ProxyConfig) []string {
	var env []string
	add := func(v *string, names ...string) {
		if v == nil {
			return
		}
		for _, n := range names {
			env = append(env, n+"="+*v)
		}
	}
	add(p.HTTPProxy, "http_proxy", "HTTP_PROXY")
	add(p.HTTPSProxy, "https_proxy", "HTTPS_PROXY")
	add(p.NoProxy, "no_proxy", "NO_PROXY")
	return env
}

// gitConfig is how git is run with a source secret's credentials.
type gitConfig struct {
	env  []string
	args []string
}

// gitCredentials turns a mounted source secret into git settings, writing
// what git needs as files into dir (which only the builder can read):
//
//   - username and password (or password alone, a token): HTTP basic auth,
//     answered by an askpass program that reads the secret's files;
//   - ssh-privatekey: the key for ssh, with known_hosts checked when the
//     secret has it and host keys accepted otherwise (as OpenShift does);
//   - ca.crt: the certificate authority for HTTPS;
//   - .gitconfig: git configuration, used as the global one.
//
// Git never prompts on a terminal: a repository that wants credentials the
// secret does not have fails at once.
func gitCredentials(secretDir, dir string) (gitConfig, error) {
	cfg := gitConfig{env: []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false"}}
	if secretDir == "" {
		return cfg, nil
	}
	has := func(name string) (string, bool) {
		path := filepath.Join(secretDir, name)
		info, err := os.Stat(path)
		return path, err == nil && !info.IsDir()
	}
	if pw, ok := has("password"); ok {
		user := ""
		if u, ok := has("username"); ok {
			user = u
		}
		askpass := filepath.Join(dir, "askpass")
		if err := os.WriteFile(askpass, []byte(askpassScript(user, pw)), 0o700); err != nil {
			return gitConfig{}, err
		}
		cfg.env = append(cfg.env, "GIT_ASKPASS="+askpass)
	}
	if key, ok := has("ssh-privatekey"); ok {
		data, err := os.ReadFile(key)
		if err != nil {
			return gitConfig{}, err
		}
		// ssh refuses a key others can read; mounted secrets often are.
		keyCopy := filepath.Join(dir, "ssh-privatekey")
		if err := os.WriteFile(keyCopy, data, 0o600); err != nil { //nolint:gosec // keyCopy is in the builder's own temporary directory
			return gitConfig{}, err
		}
		hostCheck := "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
		if kh, ok := has("known_hosts"); ok {
			hostCheck = "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + shellQuote(kh)
		}
		cfg.env = append(cfg.env, "GIT_SSH_COMMAND=ssh -i "+shellQuote(keyCopy)+" -o IdentitiesOnly=yes -o BatchMode=yes "+hostCheck)
	}
	if ca, ok := has("ca.crt"); ok {
		cfg.args = append(cfg.args, "-c", "http.sslCAInfo="+ca)
	}
	if gc, ok := has(".gitconfig"); ok {
		cfg.env = append(cfg.env, "GIT_CONFIG_GLOBAL="+gc)
	}
	return cfg, nil
}

// askpassScript is a GIT_ASKPASS program answering git's username prompt
// with the file user (or a placeholder when a token needs none) and its
// password prompt with the file password. The secret never appears on a
// command line or in the environment.
func askpassScript(user, password string) string {
	userCmd := "echo archway"
	if user != "" {
		userCmd = "cat " + shellQuote(user)
	}
	return "#!/bin/sh\ncase \"$1\" in\n[Uu]sername*) " + userCmd + " ;;\n*) cat " + shellQuote(password) + " ;;\nesac\n"
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
