package plugin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// buildContext is where a BuildConfig's build finds its context and its
// Dockerfile in a binary input: source.contextDir and
// dockerStrategy.dockerfilePath.
type buildContext struct {
	// dir is the context directory, slash-separated and relative to the
	// input's root ("" for the root).
	dir string
	// dockerfile is the Dockerfile's path relative to dir ("": Dockerfile,
	// else Containerfile, as the builder picks it).
	dockerfile string
}

func contextOf(bc *buildv1.BuildConfig) buildContext {
	c := buildContext{dir: strings.Trim(path.Clean("/"+bc.Spec.Source.ContextDir), "/")}
	if ds := bc.Spec.Strategy.DockerStrategy; ds != nil {
		c.dockerfile = ds.DockerfilePath
	}
	return c
}

// maxIgnoreFileBytes bounds the ignore file read.
const maxIgnoreFileBytes = 1 << 20

// uploadFilter says which files of a --from-dir directory are uploaded:
// never a .git directory or file (as oc start-build --from-dir leaves
// them out: a repository's history is not source, and can hold what was
// meant to be deleted), and not what the build context's ignore file
// excludes, with docker's and buildah's pattern rules (the builder applies
// the same file again when it builds). The Dockerfile and the ignore file
// are always sent, as docker sends them even when the patterns name them.
type uploadFilter struct {
	context string // the context directory, "" for the root
	pm      *patternmatcher.PatternMatcher
	keep    map[string]bool // paths relative to the context always sent
	// ignoreFile is the ignore file's path relative to the input root, ""
	// for none.
	ignoreFile string
	// exclude leaves out the paths (relative to the input root) it
	// matches, and everything under a directory it matches, as oc
	// start-build --exclude does; nil: none.
	exclude *regexp.Regexp
}

// newUploadFilter reads the ignore file the build of bctx uses, chosen as
// buildah chooses it: beside the Dockerfile, <Dockerfile>.dockerignore,
// else <Dockerfile>.containerignore; else the context's .containerignore,
// else its .dockerignore.
func newUploadFilter(root *os.Root, bctx buildContext) (*uploadFilter, error) {
	f := &uploadFilter{context: bctx.dir, keep: map[string]bool{}}
	dockerfile := bctx.dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
		if !exists(root, f.rel("Dockerfile")) && exists(root, f.rel("Containerfile")) {
			dockerfile = "Containerfile"
		}
	}
	dockerfile = path.Clean(dockerfile)
	f.keep[dockerfile] = true
	for _, name := range []string{dockerfile + ".dockerignore", dockerfile + ".containerignore", ".containerignore", ".dockerignore"} {
		patterns, found, err := readIgnoreFile(root, f.rel(name))
		if err != nil {
			return nil, fmt.Errorf("the build context's ignore file %s: %w", f.rel(name), err)
		}
		if !found {
			continue
		}
		f.keep[name] = true
		f.ignoreFile = f.rel(name)
		if f.pm, err = patternmatcher.New(patterns); err != nil {
			return nil, fmt.Errorf("the build context's ignore file %s: %w", f.rel(name), err)
		}
		break
	}
	return f, nil
}

// rel is a path of the context relative to the input's root.
func (f *uploadFilter) rel(name string) string {
	if f.context == "" {
		return name
	}
	return f.context + "/" + name
}

// skip says whether name (slash-separated, relative to the input's root)
// is left out, and, for a directory left out, whether its files must still
// be walked because an exception pattern (!dir/file) may bring some back.
func (f *uploadFilter) skip(name string, dir bool) (skip, walk bool, err error) {
	for _, part := range strings.Split(name, "/") {
		if part == ".git" {
			return true, false, nil
		}
	}
	if f.exclude != nil && f.exclude.MatchString(name) {
		return true, false, nil
	}
	if f.pm == nil {
		return false, false, nil
	}
	inContext := name
	if f.context != "" {
		var ok bool
		if inContext, ok = strings.CutPrefix(name, f.context+"/"); !ok {
			return false, false, nil // the context's parents, or outside it
		}
	}
	if f.keep[inContext] {
		return false, false, nil
	}
	matched, err := f.pm.MatchesOrParentMatches(inContext)
	if err != nil || !matched {
		return false, false, err
	}
	if !dir || !f.pm.Exclusions() {
		return true, false, nil
	}
	for _, p := range f.pm.Patterns() {
		if p.Exclusion() && strings.HasPrefix(p.String()+"/", inContext+"/") {
			return true, true, nil
		}
	}
	return true, false, nil
}

func exists(root *os.Root, name string) bool {
	_, err := root.Stat(name)
	return err == nil
}

// readIgnoreFile reads the patterns of an ignore file; found is false when
// there is none.
func readIgnoreFile(root *os.Root, name string) (patterns []string, found bool, err error) {
	info, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, errors.New("it is not a regular file")
	}
	file, err := root.Open(name)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = file.Close() }()
	data, err := io.ReadAll(io.LimitReader(file, maxIgnoreFileBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > maxIgnoreFileBytes {
		return nil, false, fmt.Errorf("it is larger than %d bytes", maxIgnoreFileBytes)
	}
	patterns, err = ignorefile.ReadAll(strings.NewReader(string(data)))
	return patterns, true, err
}
