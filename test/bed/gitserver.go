package bed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// GitServer serves Git repositories over smart HTTP with git's own
// http-backend (run as a CGI program), as a Git hosting service does: build
// pods clone from it as they would from a remote, with no file:// URI. A
// test can hold clones (Hold) to change a repository between two of them.
type GitServer struct {
	// URL is the server's base, http://127.0.0.1:<port>; a repository
	// named name is at URL + "/" + name + ".git".
	URL string

	root string
	srv  *http.Server

	mu sync.Mutex
	// clones counts the clones (fetches) begun; from the holdFrom-th on,
	// each waits until release is closed.
	clones   int
	holdFrom int
	release  chan struct{}
	held     chan struct{}
	heldOnce sync.Once
}

// StartGitServer serves the bare repositories under a new directory of
// dir on a free loopback port, until ctx ends or Stop is called.
func StartGitServer(ctx context.Context, dir string) (*GitServer, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("finding git's programs: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git's http-backend: %w", err)
	}
	root, err := os.MkdirTemp(dir, "git-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &GitServer{URL: "http://" + l.Addr().String(), root: root}
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") {
			g.begin(r.Context())
		}
		cgiHandler.ServeHTTP(w, r)
	})}
	go func() { _ = g.srv.Serve(l) }()
	go func() { <-ctx.Done(); g.Stop() }()
	return g, nil
}

// begin counts a clone and holds it when holding is on.
func (g *GitServer) begin(ctx context.Context) {
	g.mu.Lock()
	g.clones++
	hold := g.release != nil && g.clones >= g.holdFrom
	release, held := g.release, g.held
	g.mu.Unlock()
	if !hold {
		return
	}
	g.heldOnce.Do(func() { close(held) })
	select {
	case <-release:
	case <-ctx.Done():
	}
}

// Hold makes the n-th clone from now on (n = 1: the next) and every later
// one wait until the returned release is called; held is closed once one is
// waiting. Clones are counted by their first request (git's GET of
// info/refs), so each fetch of a repository counts once.
func (g *GitServer) Hold(n int) (held <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdFrom = g.clones + n
	g.release, g.held, g.heldOnce = make(chan struct{}), make(chan struct{}), sync.Once{}
	rel := g.release
	var once sync.Once
	return g.held, func() { once.Do(func() { close(rel) }) }
}

// Stop stops serving.
func (g *GitServer) Stop() { _ = g.srv.Close() }

// GitRepo is a repository the GitServer serves, with a working copy to
// change it from.
type GitRepo struct {
	// URL is what git clones.
	URL  string
	work string
	bare string
}

// NewRepo makes the repository name holding files (path -> content) on
// branch main, and returns it and main's commit.
func (g *GitServer) NewRepo(name string, files map[string]string) (*GitRepo, string, error) {
	r := &GitRepo{URL: g.URL + "/" + name + ".git", work: filepath.Join(g.root, name+"-work"), bare: filepath.Join(g.root, name+".git")}
	if _, err := gitIn(g.root, "init", "-q", "--bare", "-b", "main", r.bare); err != nil {
		return nil, "", err
	}
	if _, err := gitIn(g.root, "init", "-q", "-b", "main", r.work); err != nil {
		return nil, "", err
	}
	commit, err := r.Commit("the first commit", files)
	if err != nil {
		return nil, "", err
	}
	return r, commit, nil
}

// Commit writes files into the working copy, commits them on main with
// message, pushes main to the served repository and returns the commit.
func (r *GitRepo) Commit(message string, files map[string]string) (string, error) {
	for name, content := range files {
		p := filepath.Join(r.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{{"add", "."}, {"commit", "-q", "-m", message}, {"push", "-q", r.bare, "main"}} {
		if _, err := gitIn(r.work, args...); err != nil {
			return "", err
		}
	}
	return gitIn(r.work, "rev-parse", "HEAD")
}

// gitIn runs git in dir as a fixed author, without the machine's
// configuration.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %v: %w\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
