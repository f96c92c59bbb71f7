package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// repoSnapshot is the files of one commit of a local Git repository
// (--from-repo), written for uploading: only committed files (submodules
// included), as oc start-build --from-repo sends them.
type repoSnapshot struct {
	// dir is the directory to upload: the commit's files, or their
	// subdirectory when the repository was named by a directory below its
	// root.
	dir string
	// tmp holds the files, removed by remove.
	tmp string
	// revision is the commit, its author, committer and message.
	revision buildv1.GitSourceRevision
}

func (s *repoSnapshot) remove() { _ = os.RemoveAll(s.tmp) }

// snapshotRepo writes the files of commit (default HEAD) of the repository
// holding dir into a temporary directory. It needs the git command, as oc
// does.
func snapshotRepo(ctx context.Context, dir, commit string, warn io.Writer) (*repoSnapshot, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errors.New("--from-repo needs git on your PATH: install it, or upload the directory with --from-dir")
	}
	if commit == "" {
		commit = "HEAD"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	top, err := git(ctx, abs, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("--from-repo %s is not in a Git repository: %w", dir, err)
	}
	sub := ""
	if realAbs, err := filepath.EvalSymlinks(abs); err == nil {
		if rel, err := filepath.Rel(top, realAbs); err == nil && rel != "." && filepath.IsLocal(rel) {
			sub = rel
			_, _ = fmt.Fprintf(warn, "--from-repo %s is below the repository's root %s: uploading %s of the commit\n", dir, top, filepath.ToSlash(rel))
		}
	}
	// %x00 separates the fields; the message is last and may hold anything.
	show, err := git(ctx, top, nil, "show", "--no-patch", "--format=%H%x00%an%x00%ae%x00%cn%x00%ce%x00%B", commit+"^{commit}", "--")
	if err != nil {
		return nil, fmt.Errorf("--commit %s: not a commit of %s: %w", commit, top, err)
	}
	f := strings.SplitN(show, "\x00", 6)
	if len(f) != 6 {
		return nil, fmt.Errorf("reading commit %s of %s: unexpected git output", commit, top)
	}
	snap := &repoSnapshot{revision: buildv1.GitSourceRevision{
		Commit:    f[0],
		Author:    buildv1.SourceControlUser{Name: f[1], Email: f[2]},
		Committer: buildv1.SourceControlUser{Name: f[3], Email: f[4]},
		Message:   strings.TrimSpace(f[5]),
	}}
	if snap.tmp, err = os.MkdirTemp("", "kubectl-archway-repo-"); err != nil {
		return nil, err
	}
	files := filepath.Join(snap.tmp, "files")
	if err := checkoutCommit(ctx, top, snap.revision.Commit, files, snap.tmp, 0); err != nil {
		snap.remove()
		return nil, err
	}
	snap.dir = filepath.Join(files, sub)
	return snap, nil
}

// maxSubmoduleDepth bounds the nesting of submodules.
const maxSubmoduleDepth = 10

// checkoutCommit writes the files of commit of the repository whose work
// tree is top into dest, with a temporary index in scratch, so that the
// user's index, work tree and configuration stay as they are; then, in
// turn, each submodule's files at the commit the superproject records,
// from the submodule's own repository under top (no network: a submodule
// must be checked out there, as git submodule update leaves it).
func checkoutCommit(ctx context.Context, top, commit, dest, scratch string, depth int) error {
	if depth > maxSubmoduleDepth {
		return fmt.Errorf("%s: submodules nested more than %d deep", top, maxSubmoduleDepth)
	}
	gitDir, err := git(ctx, top, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	index := filepath.Join(scratch, fmt.Sprintf("index-%d-%s", depth, commit))
	env := []string{"GIT_INDEX_FILE=" + index, "GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + dest}
	if _, err := git(ctx, dest, env, "read-tree", commit); err != nil {
		return fmt.Errorf("reading commit %s of %s: %w", commit, top, err)
	}
	if _, err := git(ctx, dest, env, "checkout-index", "--all", "--force"); err != nil {
		return fmt.Errorf("writing the files of commit %s of %s: %w", commit, top, err)
	}
	_ = os.Remove(index)
	tree, err := git(ctx, top, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	if err != nil {
		return err
	}
	for _, entry := range strings.Split(tree, "\x00") {
		// "<mode> <type> <object>\t<path>"; submodules are mode 160000.
		meta, path, ok := strings.Cut(entry, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[0] != "160000" {
			continue
		}
		sub := filepath.Join(top, filepath.FromSlash(path))
		if !filepath.IsLocal(filepath.FromSlash(path)) {
			return fmt.Errorf("commit %s of %s has a submodule at %q, outside the repository", commit, top, path)
		}
		if _, err := git(ctx, sub, nil, "cat-file", "-e", f[2]+"^{commit}"); err != nil {
			return fmt.Errorf("submodule %s (commit %s) is not checked out in %s: run git submodule update --init --recursive there", path, f[2], top)
		}
		if err := checkoutCommit(ctx, sub, f[2], filepath.Join(dest, filepath.FromSlash(path)), scratch, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// git runs git in dir, with env added to the environment, and returns its
// output, trimmed of surrounding white space.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	// Nothing may prompt; the git variables of the caller's environment
	// (a GIT_DIR of a hook, say) must not redirect these commands.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GIT_DIR=") && !strings.HasPrefix(e, "GIT_WORK_TREE=") && !strings.HasPrefix(e, "GIT_INDEX_FILE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", errors.New(msg)
		}
		return "", err
	}
	return strings.TrimSpace(stdout.String()), nil
}
