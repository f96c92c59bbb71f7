package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/openshift/imagebuilder"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/version"
)

// A build whose inputs are all the same as an earlier build's in the same
// work directory gives the same image, so with Request.ReuseResults the
// earlier image is used without running buildah, and when it was pushed to
// the same repository, the push is a manifest put under the new tag: no
// layer is read, compressed or uploaded again.
//
// The inputs are keyed strictly: the Dockerfile's content, every file of
// the build context (path, type, mode, owner and content; not times), the
// target platform, every build arg, label and environment variable, the
// manifest format, the digest of each base image's manifest for the target
// platform as the registry has it now, and the builder's own version. A
// build that reads anything the key cannot see is never reused: one with
// RUN mounts (Request.RunMounts, RUN --mount), ADD from a URL, COPY --from
// an image rather than a stage, a FROM --platform, or a base image that
// cannot be read.

// resultRecord is what a build whose inputs hash to a key gave: the file
// results/<key>.json in the work directory.
type resultRecord struct {
	// ImageID is the built image in the store.
	ImageID string `json:"imageID"`
	// Pushed is the image as last pushed, when it was.
	Pushed *Image `json:"pushed,omitempty"`
}

// resultKeyVersion changes when the key's composition does.
const resultKeyVersion = "archway-build-result-v2"

// resultKeyInputs are what a result key digests.
type resultKeyInputs struct {
	Version    string            `json:"version"`
	Builder    string            `json:"builder"`
	Dockerfile string            `json:"dockerfile"`
	Context    string            `json:"context"`
	Platform   string            `json:"platform"`
	Args       map[string]string `json:"args"`
	Labels     map[string]string `json:"labels"`
	Env        []string          `json:"env"`
	Format     Format            `json:"format"`
	Bases      []resolvedBase    `json:"bases"`
}

// resolvedBase is a base image and the digest of the manifest the pull for
// the target platform takes.
type resolvedBase struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// resultKey returns the key of req's result, or "" when the build reads
// something the key cannot see.
func resultKey(req Request, dockerfile []byte, target platform.Platform, bases []resolvedBase) (string, error) {
	if len(req.RunMounts) > 0 || !keyableDockerfile(dockerfile) {
		return "", nil
	}
	for _, b := range bases {
		if b.Digest == "" {
			return "", nil
		}
	}
	ctxDigest, ok, err := contextDigestFor(req.ContextDir, dockerfile)
	if err != nil || !ok {
		return "", err
	}
	ignored, err := ignoreFilesDigest(dockerfileDir(req))
	if err != nil {
		return "", err
	}
	ctxDigest += " " + ignored
	format := req.Format
	if format == "" {
		format = FormatOCI
	}
	df := sha256.Sum256(dockerfile)
	inputs := resultKeyInputs{
		Version:    resultKeyVersion,
		Builder:    builderVersion(),
		Dockerfile: hex.EncodeToString(df[:]),
		Context:    ctxDigest,
		Platform:   target.Normalize().String(),
		Args:       orEmpty(req.Args),
		Labels:     orEmpty(req.Labels),
		Env:        req.Env,
		Format:     format,
		Bases:      bases,
	}
	raw, err := json.Marshal(inputs)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// builderVersion names the program that builds: its version and, for a
// development build, the commit and module versions it was built from.
func builderVersion() string {
	v := version.Version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	var sb strings.Builder
	sb.WriteString(v)
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.modified" || s.Key == "vcs.time" {
			sb.WriteString(" " + s.Key + "=" + s.Value)
		}
	}
	for _, d := range info.Deps {
		if strings.HasPrefix(d.Path, "go.podman.io/") || strings.HasPrefix(d.Path, "github.com/openshift/imagebuilder") {
			sb.WriteString(" " + d.Path + "@" + d.Version)
		}
	}
	return sb.String()
}

// keyableDockerfile reports whether everything dockerfile builds from is
// covered by a result key: no instruction reads a URL, an image other than
// the FROM bases, or a mount.
func keyableDockerfile(dockerfile []byte) bool {
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return false
	}
	stages := map[string]bool{}
	count := 0
	for _, node := range root.Children {
		switch strings.ToLower(node.Value) {
		case "from":
			if hasFlag(node, "platform") {
				return false
			}
			if words := nodeWords(node); len(words) >= 3 && strings.EqualFold(words[1], "as") {
				stages[strings.ToLower(words[2])] = true
			}
			stages[strconv.Itoa(count)] = true
			count++
		case "run":
			if hasFlag(node, "mount") {
				return false
			}
		case "add", "copy":
			for _, f := range node.Flags {
				if from, ok := strings.CutPrefix(strings.TrimPrefix(f, "--"), "from="); ok && !stages[strings.ToLower(from)] {
					return false
				}
			}
			if strings.EqualFold(node.Value, "add") {
				for _, w := range nodeWords(node) {
					if strings.Contains(w, "://") || strings.HasPrefix(w, "git@") {
						return false
					}
				}
			}
		case "onbuild":
			return false
		}
	}
	return true
}

// contextSources returns the paths of the build context that dockerfile's
// COPY and ADD instructions read, cleaned and relative to the context, or
// ok false when that cannot be told from the Dockerfile alone: a source
// with a wildcard or a variable, or the whole context (".").
func contextSources(dockerfile []byte) (paths []string, ok bool) {
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return nil, false
	}
	for _, node := range root.Children {
		switch strings.ToLower(node.Value) {
		case "add", "copy":
		default:
			continue
		}
		if hasFlag(node, "from") {
			continue // a stage (an image is not keyable at all)
		}
		words := nodeWords(node)
		if len(words) < 2 {
			return nil, false
		}
		for _, src := range words[:len(words)-1] {
			if strings.HasPrefix(src, "<<") {
				continue // a here-document: its content is in the Dockerfile
			}
			if strings.ContainsAny(src, "*?[\\$") {
				return nil, false
			}
			// buildah resolves a source inside the context: "/a" and
			// "../a" are the context's "a".
			clean := strings.TrimPrefix(path.Clean("/"+src), "/")
			if clean == "" {
				return nil, false
			}
			paths = append(paths, clean)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), true
}

// ignoreFileSuffixes end the names of the files that leave paths out of
// what COPY and ADD read (.dockerignore, .containerignore, and
// <Dockerfile>.dockerignore beside the Dockerfile).
var ignoreFileSuffixes = []string{".dockerignore", ".containerignore"}

// dockerfileDir is the directory of req's Dockerfile.
func dockerfileDir(req Request) string {
	switch {
	case req.Dockerfile == "":
		return req.ContextDir
	case filepath.IsAbs(req.Dockerfile):
		return filepath.Dir(req.Dockerfile)
	}
	return filepath.Dir(filepath.Join(req.ContextDir, req.Dockerfile))
}

// ignoreFilesDigest digests the ignore files in dir, the Dockerfile's
// directory, which may be outside the context: buildah reads
// <Dockerfile>.dockerignore there.
func ignoreFilesDigest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading the Dockerfile's directory: %w", err)
	}
	h := sha256.New()
	for _, e := range entries {
		for _, suffix := range ignoreFileSuffixes {
			if !strings.HasSuffix(e.Name(), suffix) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return "", fmt.Errorf("reading %s: %w", e.Name(), err)
			}
			fmt.Fprintf(h, "%q %d %x\n", e.Name(), len(data), sha256.Sum256(data))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// contextDigestFor digests what dockerfile can read of the build context
// in dir: the paths its COPY and ADD instructions name (each a file, or a
// directory and all below it) and the ignore files at the context's top,
// or, when those paths cannot be told or one of them leads through a
// symbolic link, the whole context (contextDigest). So a file no
// instruction copies, such as a clone's .git, does not change the key.
func contextDigestFor(dir string, dockerfile []byte) (string, bool, error) {
	sources, ok := contextSources(dockerfile)
	if !ok {
		return contextDigest(dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false, fmt.Errorf("digesting the build context: %w", err)
	}
	defer func() { _ = root.Close() }()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false, fmt.Errorf("digesting the build context: %w", err)
	}
	for _, e := range entries {
		for _, suffix := range ignoreFileSuffixes {
			if strings.HasSuffix(e.Name(), suffix) {
				sources = append(sources, e.Name())
			}
		}
	}
	slices.Sort(sources)
	sources = slices.Compact(sources)
	h := sha256.New()
	_, _ = io.WriteString(h, "sources\n")
	for _, src := range sources {
		// Every directory on the way must be one: a link could name
		// anything, and is digested with the whole context.
		parts := strings.Split(src, "/")
		for i := 1; i < len(parts); i++ {
			info, err := root.Lstat(strings.Join(parts[:i], "/"))
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if err != nil {
				return "", false, fmt.Errorf("digesting the build context: %w", err)
			}
			if !info.IsDir() {
				return contextDigest(dir)
			}
		}
		info, err := root.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(h, "%q missing\n", src)
			continue
		}
		if err != nil {
			return "", false, fmt.Errorf("digesting the build context: %w", err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return contextDigest(dir)
		}
		if ok, err := digestTree(root, dir, src, h); err != nil || !ok {
			return "", ok, err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), true, nil
}

// contextDigest digests every entry below dir: its path, type, mode, owner
// and, for a file, its content; for a symbolic link, its target. ok is
// false when dir holds something else (a device, a socket, a pipe).
func contextDigest(dir string) (string, bool, error) {
	// Files are opened through the context's root, so that a directory
	// swapped for a link during the walk cannot lead outside it.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false, fmt.Errorf("digesting the build context: %w", err)
	}
	defer func() { _ = root.Close() }()
	h := sha256.New()
	ok, err := digestTree(root, dir, ".", h)
	if err != nil {
		return "", false, err
	}
	return hex.EncodeToString(h.Sum(nil)), ok, nil
}

// digestTree writes to h every entry of the context dir (opened as root)
// at rel and below it (contextDigest). ok is false when it holds something
// else than files, directories and symbolic links.
func digestTree(root *os.Root, dir, rel string, h hash.Hash) (bool, error) {
	ok := true
	err := filepath.WalkDir(filepath.Join(dir, rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var uid, gid uint32
		if st, isStat := info.Sys().(*syscall.Stat_t); isStat {
			uid, gid = st.Uid, st.Gid
		}
		fmt.Fprintf(h, "%q %o %d %d", rel, uint32(info.Mode()), uid, gid)
		switch {
		case info.Mode().IsRegular():
			f, err := root.Open(rel)
			if err != nil {
				return err
			}
			fh := sha256.New()
			n, err := io.Copy(fh, f)
			_ = f.Close()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " %d %x", n, fh.Sum(nil))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(rel)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " -> %q", target)
		case info.IsDir():
		default:
			ok = false
			return fs.SkipAll
		}
		_, _ = io.WriteString(h, "\n")
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("digesting the build context: %w", err)
	}
	return ok, nil
}

// resultPath is where the record of key is kept.
func (b *Builder) resultPath(key string) string {
	return filepath.Join(b.cfg.WorkDir, "results", key+".json")
}

// loadResult returns the record of key, or nil when there is none usable:
// no record, or its image is no longer in the store.
func (b *Builder) loadResult(key string) *resultRecord {
	raw, err := os.ReadFile(b.resultPath(key))
	if err != nil {
		return nil
	}
	var rec resultRecord
	if json.Unmarshal(raw, &rec) != nil || rec.ImageID == "" {
		return nil
	}
	if _, err := b.store.Image(rec.ImageID); err != nil {
		return nil
	}
	return &rec
}

// saveResult records rec as key's result. Failing to record costs a later
// build its reuse, nothing else, so it is not an error.
func (b *Builder) saveResult(key string, rec resultRecord) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return
	}
	dir := filepath.Dir(b.resultPath(key))
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".record-")
	if err != nil {
		return
	}
	_, werr := tmp.Write(raw)
	if errors.Join(werr, tmp.Close()) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), b.resultPath(key)) != nil {
		_ = os.Remove(tmp.Name())
	}
}

// retag puts the manifest of img, an image in dest's repository, under
// dest's tag. It reads the manifest from the registry and checks its
// digest first, so an image the registry lost is an error, not a dangling
// tag.
func retag(ctx context.Context, sys *types.SystemContext, img Image, dest string) error {
	srcRef, err := docker.ParseReference("//" + img.Reference)
	if err != nil {
		return err
	}
	src, err := srcRef.NewImageSource(ctx, sys)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	raw, _, err := src.GetManifest(ctx, nil)
	if err != nil {
		return err
	}
	if got, err := manifest.Digest(raw); err != nil || got.String() != img.Digest {
		return fmt.Errorf("the registry's manifest %s does not have that digest", img.Reference)
	}
	destRef, err := docker.ParseReference("//" + dest)
	if err != nil {
		return err
	}
	d, err := destRef.NewImageDestination(ctx, sys)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	if err := d.PutManifest(ctx, raw, nil); err != nil {
		return err
	}
	return d.Commit(ctx, nil)
}
