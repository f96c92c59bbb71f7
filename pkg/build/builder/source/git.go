package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	// uri is the source's URI as the Build gives it: its credentials are
	// redacted from what git says.
	uri string
}

// fetchGit fetches the repository's ref (or the Build's revision) into dir,
// shallowly when it can, checks it out with its submodules, and returns the
// commit checked out.
func fetchGit(ctx context.Context, opts Options, dir string, out io.Writer) (*buildv1.SourceRevision, error) {
	git := opts.Source.Git
	ref := git.Ref
	pinned := opts.Revision != nil && opts.Revision.Git != nil && opts.Revision.Git.Commit != ""
	if pinned {
		ref = opts.Revision.Git.Commit
		// The source ref is fetched too, to check the commit is on it.
		if err := CheckGitRef(git.Ref); err != nil {
			return nil, fetchFailed("%w", err)
		}
	}
	// Checked here again although admission refuses them: a ref or URI
	// read as an option (--upload-pack=...) would run a command in the
	// builder, outside the build's chroot, holding the push credentials.
	if err := CheckGitURI(git.URI, opts.AllowFileGitURIs); err != nil {
		return nil, fetchFailed("%w", err)
	}
	if err := CheckGitRef(ref); err != nil {
		return nil, fetchFailed("%w", err)
	}
	shown := RedactURI(git.URI)
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fetchFailed("git is not installed: %w", err)
	}
	credDir, err := os.MkdirTemp("", "archway-git-")
	if err != nil {
		return nil, fetchFailed("preparing git credentials: %w", err)
	}
	defer func() { _ = os.RemoveAll(credDir) }()
	uri, uriUser, uriPassword, uriHasCredentials := uriCredentials(git.URI)
	origin := credentialOrigin(uri)
	cfg, err := gitCredentials(opts.SecretDir, credDir, origin)
	if err != nil {
		return nil, fetchFailed("reading the source secret: %w", err)
	}
	if uriHasCredentials && !cfg.askpass {
		if cfg.env, err = uriAskpass(cfg.env, credDir, origin, uriUser, uriPassword); err != nil {
			return nil, fetchFailed("preparing git credentials: %w", err)
		}
	}
	if cfg.hostKeysUnchecked {
		_, _ = fmt.Fprintln(out, "Warning: the source secret has an ssh-privatekey but no known_hosts: the git server's host key "+
			"is accepted without being checked. Add the server's known_hosts line to the secret to have it checked.")
	}
	env := append(cfg.env, "GIT_ALLOW_PROTOCOL="+GitProtocols(opts.AllowFileGitURIs))
	// maintenance.auto=false: a fetch would start "git maintenance run
	// --auto" afterwards, a process more that a new clone never needs.
	args := append(cfg.args, "-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
		"-c", "maintenance.auto=false")
	if !opts.AllowFileGitURIs {
		args = append(args, "-c", "protocol.file.allow=never")
	}
	g := &gitRun{dir: dir, env: append(env, proxyEnv(git.ProxyConfig)...), args: args, out: out, uri: git.URI}

	at := ""
	if ref != "" {
		at = " at " + ref
	}
	_, _ = fmt.Fprintf(out, "Cloning %q%s\n", shown, at)

	// Every git process costs CPU that the other platforms' pods of the
	// build share: a fetch runs four (init, fetch, log, checkout), one more
	// for submodules. No template: its sample hooks never run here
	// (core.hooksPath).
	if _, err := g.run(ctx, "init", "-q", "--template="); err != nil {
		return nil, fetchFailed("git init: %w", err)
	}
	// The remote origin is what `git remote add` would write, written
	// here without a process: the context's .git has it as a clone's does,
	// and relative submodule URLs resolve against it.
	if err := addOrigin(dir, uri); err != nil {
		return nil, fetchFailed("configuring the remote origin: %w", err)
	}
	want := ref
	if want == "" {
		want = "HEAD"
	}
	commit := "FETCH_HEAD"
	if _, err := g.run(ctx, "fetch", "-q", "--depth=1", "--recurse-submodules=no", "--", "origin", want); err != nil {
		if !commitPattern.MatchString(ref) {
			return nil, fetchFailed("fetching %s from %s: %w", want, shown, err)
		}
		// Servers may refuse a commit that is not a branch or tag tip,
		// and an abbreviated hash is no ref at all: fetch everything.
		if _, ferr := g.run(ctx, "fetch", "-q", "--recurse-submodules=no", "--tags", "--", "origin", "+refs/heads/*:refs/remotes/origin/*"); ferr != nil {
			return nil, fetchFailed("fetching %s from %s: %w", want, shown, ferr)
		}
		commit = ref
	}
	revision, err := g.revision(ctx, commit)
	if err != nil {
		return nil, fetchFailed("checking out %s of %s: %w", want, shown, err)
	}
	if commit == ref {
		if err := checkResolvedCommit(ref, revision.Git.Commit); err != nil {
			return nil, fetchFailed("checking out %s of %s: %w", want, shown, err)
		}
	}
	// A commit the Build names (a webhook delivery's, start-build
	// --commit) must be on the source ref: whoever holds a webhook URL
	// must not build an old commit, an unreviewed branch or a fork's
	// commit (a host that shares objects across forks serves those too)
	// into the BuildConfig's output.
	if pinned {
		if err := g.checkOnRef(ctx, git.Ref, revision.Git.Commit); err != nil {
			return nil, fetchFailed("%w", err)
		}
	}
	// checkout takes no "--" before a commit (it would start paths): it is
	// given the commit's full hash, which no option looks like.
	if _, err := g.run(ctx, "checkout", "-q", "--detach", revision.Git.Commit); err != nil {
		return nil, fetchFailed("checking out %s of %s: %w", want, shown, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".gitmodules")); err == nil {
		if _, err := g.run(ctx, "submodule", "update", "-q", "--init", "--recursive", "--depth=1", "--"); err != nil {
			return nil, fetchFailed("fetching the submodules of %s: %w", shown, err)
		}
	}
	return revision, nil
}

// refHistoryDepth is how much of the ref's history is fetched first to
// find a pinned commit on it: a webhook's commit is the ref's tip or close
// to it. Only when it is not found there is the ref's whole history
// fetched.
const refHistoryDepth = 64

// ErrNotOnRef is the error of a commit that is not reachable from the
// Build's source ref.
var ErrNotOnRef = errors.New("not on the source ref")

// checkOnRef checks that commit (a full hash, fetched) is reachable from
// the tip of ref (HEAD when empty) on origin: fetched to refHistoryDepth
// first, then whole when the commit is not found in that part of the
// history.
func (g *gitRun) checkOnRef(ctx context.Context, ref, commit string) error {
	want := ref
	if want == "" {
		want = "HEAD"
	}
	for _, depth := range []int{refHistoryDepth, math.MaxInt32} {
		if _, err := g.run(ctx, "fetch", "-q", "--no-tags", "--depth="+strconv.Itoa(depth), "--recurse-submodules=no", "--", "origin", want); err != nil {
			return fmt.Errorf("fetching %s of %s to check that commit %s is on it: %w", want, RedactURI(g.uri), commit, err)
		}
		on, err := g.isAncestor(ctx, commit, "FETCH_HEAD")
		if err != nil {
			return fmt.Errorf("checking that commit %s is on %s of %s: %w", commit, want, RedactURI(g.uri), err)
		}
		if on {
			return nil
		}
		if shallow, err := g.run(ctx, "rev-parse", "--is-shallow-repository"); err != nil || strings.TrimSpace(shallow) != "true" {
			break
		}
	}
	return fmt.Errorf("commit %s is %w: it is not reachable from %s of %s. A Build builds only commits of its "+
		"source ref: the webhook delivery or start-build --commit named an older tag's, another branch's or a "+
		"fork's commit. Push the commit to %s, or build the branch that holds it (spec.source.git.ref)",
		commit, ErrNotOnRef, want, RedactURI(g.uri), want)
}

// isAncestor says whether commit is an ancestor of (or is) tip, both
// fixed names or full hashes.
func (g *gitRun) isAncestor(ctx context.Context, commit, tip string) (bool, error) {
	_, err := g.run(ctx, "merge-base", "--is-ancestor", commit, tip)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 1:
		return false, nil
	}
	return false, err
}

// checkResolvedCommit checks that the commit a (possibly abbreviated)
// hash resolved to starts with it: git resolves a name as a ref before it
// does as a commit, and a tag spelled like the wanted hash (one pushed
// between the two fetches, say) must not stand in for it.
func checkResolvedCommit(hash, resolved string) error {
	if !strings.HasPrefix(resolved, hash) {
		return fmt.Errorf("%s resolved to %s, which is not the commit it names (a ref of that name?)", hash, resolved)
	}
	return nil
}

// fullHash matches a full SHA-1 or SHA-256 commit hash.
var fullHash = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// revision reads commit (a fixed name or a hash: nothing option-like) and
// its author, committer and message in one git process.
func (g *gitRun) revision(ctx context.Context, commit string) (*buildv1.SourceRevision, error) {
	const sep = "\x1f"
	info, err := g.run(ctx, "log", "-1", "--format=%H"+sep+"%an"+sep+"%ae"+sep+"%cn"+sep+"%ce"+sep+"%B", "--end-of-options", commit+"^{commit}", "--")
	if err != nil {
		return nil, err
	}
	f := strings.SplitN(info, sep, 6)
	if len(f) != 6 || !fullHash.MatchString(f[0]) {
		return nil, fmt.Errorf("unexpected git log output %q", info)
	}
	return &buildv1.SourceRevision{
		Type: buildv1.BuildSourceGit,
		Git: &buildv1.GitSourceRevision{
			Commit:    f[0],
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
	cmd.Stderr = io.MultiWriter(&stderr, redactingWriter{uri: g.uri, w: g.out})
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	msg := redact(g.uri, lastLines(stderr.String(), 5))
	var exitErr *exec.ExitError
	if msg == "" || !errors.As(err, &exitErr) {
		return "", err
	}
	return "", &gitError{msg: msg, err: err}
}

// gitError is what git said on a failure (its message), wrapping the
// process's exit error (its code).
type gitError struct {
	msg string
	err error
}

func (e *gitError) Error() string { return e.msg }
func (e *gitError) Unwrap() error { return e.err }

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
	// askpass: the secret answers git's username and password prompts.
	askpass bool
	// hostKeysUnchecked: ssh accepts any host key (an ssh key without
	// known_hosts).
	hostKeysUnchecked bool
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
//
// A username and password are given only to the Build's own server
// (origin, see credentialOrigin), as OpenShift's credential store does:
// not to another host a submodule or a redirect names.
func gitCredentials(secretDir, dir, origin string) (gitConfig, error) {
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
		if err := os.WriteFile(askpass, []byte(askpassScript(origin, user, pw)), 0o700); err != nil {
			return gitConfig{}, err
		}
		cfg.env = append(cfg.env, "GIT_ASKPASS="+askpass)
		cfg.askpass = true
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
		// Without known_hosts the host key is accepted (as OpenShift
		// does), and the build log says so.
		hostCheck := "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
		cfg.hostKeysUnchecked = true
		if kh, ok := has("known_hosts"); ok {
			hostCheck = "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + shellQuote(kh)
			cfg.hostKeysUnchecked = false
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
// password prompt with the file password, for origin alone: git's prompt
// names the server ("Password for 'https://ada@host:8443': "), and one
// that is not origin (empty: none is) gets nothing, so git fails there.
// The secret never appears on a command line or in the environment.
func askpassScript(origin, user, password string) string {
	userCmd := "echo archway"
	if user != "" {
		userCmd = "cat " + shellQuote(user)
	}
	return "#!/bin/sh\n" +
		// The URL between the prompt's quotes, without its user.
		"url=${1#*\"'\"}\nurl=${url%\"'\"*}\n" +
		"case \"$url\" in *://*) ;; *) exit 1 ;; esac\n" +
		"rest=${url#*://}\n" +
		"[ -n " + shellQuote(origin) + " ] && [ \"${url%%://*}://${rest#*@}\" = " + shellQuote(origin) + " ] || exit 1\n" +
		"case \"$1\" in\n[Uu]sername*) " + userCmd + " ;;\n*) cat " + shellQuote(password) + " ;;\nesac\n"
}

// credentialOrigin is the scheme://host[:port] git names in its prompts
// for uri's server, or "" for a URI whose server git does not prompt for
// (ssh, scp-like, local).
func credentialOrigin(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// uriAskpass answers git's prompts for origin with the credentials a URI
// carried, written to files in dir, and returns env with its GIT_ASKPASS.
func uriAskpass(env []string, dir, origin, user, password string) ([]string, error) {
	userFile, passwordFile := filepath.Join(dir, "uri-username"), filepath.Join(dir, "uri-password")
	if err := os.WriteFile(userFile, []byte(user), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(passwordFile, []byte(password), 0o600); err != nil {
		return nil, err
	}
	askpass := filepath.Join(dir, "uri-askpass")
	if err := os.WriteFile(askpass, []byte(askpassScript(origin, userFile, passwordFile)), 0o700); err != nil {
		return nil, err
	}
	return append(env, "GIT_ASKPASS="+askpass), nil
}

// redactingWriter writes what git says with the URI's credentials
// redacted. Git writes its messages a line at a time.
type redactingWriter struct {
	uri string
	w   io.Writer
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, redact(r.uri, string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// addOrigin adds the remote origin fetching uri, with its default refspec,
// to the configuration of the repository git init made in dir, as `git
// remote add -- origin uri` does. It is written to the file, not given with
// -c: git passes -c settings on to the submodules' own git processes, where
// it would replace their origin for their nested submodules. uri has no
// control characters (CheckGitURI); in git's quoted value syntax only '"'
// and '\' need escaping.
func addOrigin(dir, uri string) error {
	if strings.ContainsFunc(uri, isControlOrSpace) {
		return fmt.Errorf("the git URI %q holds spaces or control characters", RedactURI(uri))
	}
	quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(uri)
	path := filepath.Join(dir, ".git", "config")
	// As git remote add, refuse a repository that has an origin already
	// (a directory fetched into before): a second url would not be used.
	existing, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.Contains(string(existing), `[remote "origin"]`) {
		return fmt.Errorf("%s already has a remote origin", dir)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintf(f, "[remote \"origin\"]\n\turl = \"%s\"\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", quoted)
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
}
