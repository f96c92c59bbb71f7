package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/openshift/imagebuilder"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"
	"golang.org/x/sys/unix"

	"github.com/archway-build/archway/pkg/build/dockerfile"
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
// build volumes (Request.RunMounts), a RUN --mount of an image, a secret or
// SSH, a RUN flag buildah would expand or unquote, ADD from a URL, COPY
// --from an image rather than an earlier stage, an image, stage or
// platform not told as buildah tells it (pkg/build/dockerfile: File.Keyable
// and Images.Unkeyed), or a base image that cannot be read. A cache or tmpfs mount's content is not
// keyed: it is a cache, as BuildKit and buildah's layer cache take it.

// resultRecord is what a build whose inputs hash to a key gave: the file
// results/<key>.json in the work directory.
type resultRecord struct {
	// ImageID is the built image in the store.
	ImageID string `json:"imageID"`
	// Pushed is the image as last pushed, when it was.
	Pushed *Image `json:"pushed,omitempty"`
}

// resultKeyVersion changes when the key's composition does.
const resultKeyVersion = "archway-build-result-v3"

// resultKeyInputs are what a result key digests.
type resultKeyInputs struct {
	Version    string            `json:"version"`
	Builder    string            `json:"builder"`
	Dockerfile string            `json:"dockerfile"`
	Context    string            `json:"context"`
	Ignore     string            `json:"ignore"`
	Platform   string            `json:"platform"`
	Args       map[string]string `json:"args"`
	// PlatformArgs are the TARGET* and BUILD* args buildah sets itself:
	// BUILDARCH is the builder's architecture, not the target's.
	PlatformArgs map[string]string `json:"platformArgs"`
	Labels       map[string]string `json:"labels"`
	Env          []string          `json:"env"`
	Format       Format            `json:"format"`
	Target       string            `json:"target,omitempty"`
	Squash       bool              `json:"squash,omitempty"`
	Bases        []resolvedBase    `json:"bases"`
}

// resolvedBase is a base image and the digest of the manifest the pull for
// the target platform takes.
type resolvedBase struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Platform is the platform of the FROM's own --platform flag; empty
	// for the target platform.
	Platform string `json:"platform,omitempty"`
	// OnBuild: the image's config has ONBUILD triggers, which run in the
	// build and may read any file of the context.
	OnBuild bool `json:"-"`
}

// keyedBuild is what a build is keyed by besides its Request: what it read
// and decided before buildah ran.
type keyedBuild struct {
	file         *dockerfile.File
	target       platform.Platform
	bases        []resolvedBase
	platformArgs map[string]string
	ignore       ignoreFile
	// unkeyedImages says the build pulls an image the key cannot name:
	// one a FROM names for a platform that cannot be told.
	unkeyedImages bool
}

// resultKey returns the key of req's result, or "" when the build reads
// something the key cannot see.
func resultKey(req Request, in keyedBuild) (string, error) {
	// A Dockerfile named *.in is run through cpp by buildah, which reads
	// the files it includes: the key sees none of them.
	if len(req.RunMounts) > 0 || in.unkeyedImages || strings.HasSuffix(req.Dockerfile, ".in") || !in.file.Keyable() {
		return "", nil
	}
	for _, b := range in.bases {
		if b.Digest == "" || b.OnBuild {
			return "", nil
		}
	}
	builder, err := builderIdentity()
	if err != nil {
		return "", nil // an unknown builder: its results are not kept
	}
	ctxDigest, ok, err := contextDigestFor(req.ContextDir, in.file)
	if err != nil || !ok {
		return "", err
	}
	format := req.Format
	if format == "" {
		format = FormatOCI
	}
	df := sha256.Sum256(in.file.Content())
	inputs := resultKeyInputs{
		Version:      resultKeyVersion,
		Builder:      builder,
		Dockerfile:   hex.EncodeToString(df[:]),
		Context:      ctxDigest,
		Ignore:       in.ignore.key(),
		Platform:     in.target.Normalize().String(),
		Args:         orEmpty(req.Args),
		PlatformArgs: orEmpty(in.platformArgs),
		Labels:       orEmpty(req.Labels),
		Env:          req.Env,
		Format:       format,
		Target:       req.Target,
		Squash:       req.Squash,
		Bases:        in.bases,
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

// builderIdentity names the program that builds: its version and the
// identity of its executable, so that two builds of the builder never share
// keys, whatever version they call themselves ("dev" for a development
// build without VCS stamping).
func builderIdentity() (string, error) {
	d, err := executableDigest()
	if err != nil {
		return "", err
	}
	return version.Version + " " + d, nil
}

// executableDigest is the running executable's identity, once per process.
var executableDigest = sync.OnceValues(func() (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", err
	}
	return executableIdentity(path)
})

// executableIdentity identifies the program at path: its Go build ID,
// which the go command derives from the digests of the build's inputs and
// of the linked binary (read from the ELF note in well under a
// millisecond), or, for a binary without one (linked with -buildid=, or
// not a Go ELF binary), the sha256 of its bytes (tens of milliseconds for
// the builder, on every build pod's warm path).
func executableIdentity(path string) (string, error) {
	if id := goBuildID(path); id != "" {
		return "go-buildid:" + id, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// goBuildIDNoteType is the type of the ELF note the Go linker writes the
// build ID into, under the name "Go".
const goBuildIDNoteType = 4

// goBuildID returns the Go build ID in the .note.go.buildid section of the
// ELF file at path, or "" when there is none.
func goBuildID(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sec := f.Section(".note.go.buildid")
	if sec == nil || sec.Size > 1<<10 {
		return ""
	}
	note, err := sec.Data()
	if err != nil || len(note) < 16 {
		return ""
	}
	// namesz, descsz, type, then the name padded to 4 bytes, then the
	// description: the build ID.
	order := f.ByteOrder
	nameSize, typ := order.Uint32(note[0:]), order.Uint32(note[8:])
	if nameSize != 4 || typ != goBuildIDNoteType || string(note[12:16]) != "Go\x00\x00" {
		return ""
	}
	desc := note[16:]
	if n := order.Uint32(note[4:]); uint64(n) < uint64(len(desc)) {
		desc = desc[:n]
	}
	return strings.TrimRight(string(desc), "\x00")
}

// maxIgnoreFileSize is the largest ignore file read.
const maxIgnoreFileSize = 1 << 20

// ignoreFile is the file whose patterns leave paths of the context out of
// what COPY and ADD read, chosen as buildah chooses it: beside the
// Dockerfile <Dockerfile>.dockerignore, else <Dockerfile>.containerignore,
// else the context's .containerignore, else its .dockerignore. The builder
// reads it and gives buildah its patterns, so that what buildah excludes is
// what was keyed.
type ignoreFile struct {
	// Name is its path relative to the context, or "<Dockerfile's
	// directory>/" and its name when it is outside; "" for none.
	Name string
	// Path is its path, for messages.
	Path string
	// Digest is the sha256 of its content.
	Digest string
	// Excludes are its patterns.
	Excludes []string
}

// key is what a result key digests of f.
func (f ignoreFile) key() string {
	if f.Name == "" {
		return ""
	}
	return strconv.Quote(f.Name) + " " + f.Digest
}

// findIgnoreFile returns the ignore file of a build of the context in
// contextDir with the Dockerfile at dockerfilePath, or a zero ignoreFile
// when there is none. It is read inside the context (or, beside a
// Dockerfile outside it, inside that directory): a link leading out of it,
// anything but a regular file, or one larger than maxIgnoreFileSize is an
// error.
func findIgnoreFile(contextDir, dockerfilePath string) (ignoreFile, error) {
	ctxAbs, err := filepath.Abs(contextDir)
	if err != nil {
		return ignoreFile{}, err
	}
	dfAbs, err := filepath.Abs(dockerfilePath)
	if err != nil {
		return ignoreFile{}, err
	}
	ctxRoot, err := os.OpenRoot(ctxAbs)
	if err != nil {
		return ignoreFile{}, fmt.Errorf("opening the build context: %w", err)
	}
	defer func() { _ = ctxRoot.Close() }()
	// A Dockerfile in the context has its ignore files read inside the
	// context; one outside, inside its own directory.
	dfRoot, dfDir, dfName, dfLabel := ctxRoot, ctxAbs, "", ""
	if rel, err := filepath.Rel(ctxAbs, dfAbs); err == nil && filepath.IsLocal(rel) {
		dfName, dfLabel = rel, filepath.ToSlash(rel)
	} else {
		dfDir = filepath.Dir(dfAbs)
		if dfRoot, err = os.OpenRoot(dfDir); err != nil {
			return ignoreFile{}, fmt.Errorf("opening the Dockerfile's directory: %w", err)
		}
		defer func() { _ = dfRoot.Close() }()
		dfName, dfLabel = filepath.Base(dfAbs), "<Dockerfile's directory>/"+filepath.Base(dfAbs)
	}
	candidates := []struct {
		root             *os.Root
		dir, name, label string
	}{
		{dfRoot, dfDir, dfName + ".dockerignore", dfLabel + ".dockerignore"},
		{dfRoot, dfDir, dfName + ".containerignore", dfLabel + ".containerignore"},
		{ctxRoot, ctxAbs, ".containerignore", ".containerignore"},
		{ctxRoot, ctxAbs, ".dockerignore", ".dockerignore"},
	}
	for _, c := range candidates {
		full := filepath.Join(c.dir, c.name)
		data, found, err := readIgnoreFile(c.root, c.name)
		if err != nil {
			return ignoreFile{}, fmt.Errorf("the ignore file %s: %w", full, err)
		}
		if !found {
			continue
		}
		excludes, err := imagebuilder.ParseIgnoreReader(bytes.NewReader(data))
		if err != nil {
			return ignoreFile{}, fmt.Errorf("the ignore file %s: %w", full, err)
		}
		sum := sha256.Sum256(data)
		return ignoreFile{Name: c.label, Path: full, Digest: "sha256:" + hex.EncodeToString(sum[:]), Excludes: excludes}, nil
	}
	return ignoreFile{}, nil
}

// readIgnoreFile reads the ignore file name in root; found is false when
// there is none (a link to nothing counts as none, as buildah has it).
func readIgnoreFile(root *os.Root, name string) (data []byte, found bool, err error) {
	// Non-blocking: a pipe put there must not hold the build.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("it must be a file inside the build context: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, fmt.Errorf("it is a %s, not a regular file", fileKind(info.Mode()))
	}
	data, err = io.ReadAll(io.LimitReader(f, maxIgnoreFileSize+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > maxIgnoreFileSize {
		return nil, false, fmt.Errorf("it has more than %d bytes", maxIgnoreFileSize)
	}
	return data, true, nil
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// contextDigestFor digests what df can read of the build context in dir:
// the paths its COPY and ADD instructions and its RUN bind mounts of the
// context name (File.ContextSources; each a file, or a directory and all
// below it), or, when those paths cannot be told or one of them leads
// through a symbolic link, the whole context (contextDigest). So a file no
// instruction reads, such as a clone's .git, does not change the key.
func contextDigestFor(dir string, df *dockerfile.File) (string, bool, error) {
	sources, ok := df.ContextSources()
	if !ok {
		return contextDigest(dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false, fmt.Errorf("digesting the build context: %w", err)
	}
	defer func() { _ = root.Close() }()
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
			if err == nil {
				err = digestXattrs(f, h)
			}
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
			f, err := root.Open(rel)
			if err != nil {
				return err
			}
			err = digestXattrs(f, h)
			_ = f.Close()
			if err != nil {
				return err
			}
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

// digestXattrs writes to h the extended attributes of f (a file or a
// directory of the context), which buildah's copier keeps in the layer:
// user.*, security.capability (a binary's capabilities), IMA's. Nothing is
// written for a file without any, or on a file system without them.
func digestXattrs(f *os.File, h hash.Hash) error {
	fd := int(f.Fd())
	size, err := unix.Flistxattr(fd, nil)
	if err != nil || size == 0 {
		if err == nil || errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return fmt.Errorf("listing the extended attributes of %s: %w", f.Name(), err)
	}
	buf := make([]byte, size)
	if size, err = unix.Flistxattr(fd, buf); err != nil {
		return fmt.Errorf("listing the extended attributes of %s: %w", f.Name(), err)
	}
	names := strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00")
	slices.Sort(names)
	for _, name := range names {
		n, err := unix.Fgetxattr(fd, name, nil)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("reading the extended attribute %s of %s: %w", name, f.Name(), err)
		}
		value := make([]byte, n)
		if n, err = unix.Fgetxattr(fd, name, value); err != nil {
			return fmt.Errorf("reading the extended attribute %s of %s: %w", name, f.Name(), err)
		}
		fmt.Fprintf(h, " xattr %q %x", name, value[:n])
	}
	return nil
}
