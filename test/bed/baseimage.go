package bed

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	imgspec "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/ulikunitz/xz"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

const (
	// BaseImageRepository is the repository SeedBaseImage pushes to.
	BaseImageRepository = "archway/busybox"
	// baseImageTag is the tag of the base image, in the registry and in the
	// cached OCI layout.
	baseImageTag = "latest"
	// baseImageFormat changes whenever the image built from the same .debs
	// would change, so that older cached layouts are not reused.
	baseImageFormat = "1"
)

// baseImageEpoch is every timestamp in the base image, so that the same
// .debs always give the same digests.
var baseImageEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// basePlatform is one platform of the base image and the Debian
// architecture whose busybox-static it carries.
type basePlatform struct {
	arch, variant, debArch string
}

// basePlatforms lists the base image's platforms in index order.
var basePlatforms = []basePlatform{
	{arch: "amd64", debArch: "amd64"},
	{arch: "arm64", variant: "v8", debArch: "arm64"},
	{arch: "arm", variant: "v7", debArch: "armhf"},
	{arch: "ppc64le", debArch: "ppc64el"},
	{arch: "s390x", debArch: "s390x"},
}

func (p basePlatform) String() string {
	s := "linux/" + p.arch
	if p.variant != "" {
		s += "/" + p.variant
	}
	return s
}

// BaseImagePlatforms returns the platforms of the base image, e.g.
// "linux/arm64/v8", in the order of its index.
func BaseImagePlatforms() []string {
	out := make([]string, len(basePlatforms))
	for i, p := range basePlatforms {
		out[i] = p.String()
	}
	return out
}

// busyboxApplets are the commands linked to busybox in /bin: what build
// steps and test commands use.
var busyboxApplets = []string{
	"[", "ash", "awk", "base64", "basename", "cat", "chmod", "chown", "cp", "cut",
	"date", "dd", "df", "diff", "dirname", "du", "echo", "env", "expr", "false",
	"find", "grep", "gunzip", "gzip", "head", "hostname", "id", "kill", "ln", "ls",
	"md5sum", "mkdir", "mktemp", "mv", "nproc", "od", "printf", "ps", "pwd",
	"readlink", "realpath", "rm", "rmdir", "sed", "seq", "sh", "sha256sum", "sleep",
	"sort", "stat", "tail", "tar", "tee", "test", "timeout", "touch", "tr", "true",
	"uname", "uniq", "wc", "wget", "which", "whoami", "xargs", "yes",
}

// SeedBaseImage pushes the multi-arch busybox base image into r and returns
// its reference, r.Host + "/archway/busybox:latest". The image is built once
// from the busybox-static .debs hack/tools.sh downloads and then kept as an
// OCI layout in CacheDir()/base-image.
func SeedBaseImage(ctx context.Context, r *Registry) (string, error) {
	dir, err := baseImageLayout()
	if err != nil {
		return "", err
	}
	src, err := layout.NewReference(dir, baseImageTag)
	if err != nil {
		return "", err
	}
	ref := r.Host + "/" + BaseImageRepository + ":" + baseImageTag
	dest, err := docker.ParseReference("//" + ref)
	if err != nil {
		return "", err
	}
	if _, err := copyImage(ctx, dest, src, r.SystemContext(), &types.SystemContext{}); err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", dir, ref, err)
	}
	return ref, nil
}

// copyImage copies an image or a whole index, digests unchanged, accepting
// any signature or none.
func copyImage(ctx context.Context, dest, src types.ImageReference, destSys, srcSys *types.SystemContext) ([]byte, error) {
	policy, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = policy.Destroy() }()
	return copy.Image(ctx, policy, dest, src, &copy.Options{
		ImageListSelection: copy.CopyAllImages,
		PreserveDigests:    true,
		SourceCtx:          srcSys,
		DestinationCtx:     destSys,
	})
}

// baseImageLayout returns the directory of the base image's OCI layout,
// building it on first use. The cache key comes from the .deb names, which
// carry Debian's version, so a new busybox-static gives a new layout.
func baseImageLayout() (string, error) {
	debs, err := busyboxDebs(filepath.Join(CacheDir(), "debs"))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "format %s\n", baseImageFormat)
	for _, deb := range debs {
		fmt.Fprintf(h, "%s\n", filepath.Base(deb))
	}
	root := filepath.Join(CacheDir(), "base-image")
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	// Built aside and renamed into place, so that a reader never sees half a
	// layout and concurrent builders (parallel test binaries) both succeed.
	tmp, err := os.MkdirTemp(root, ".building-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := buildBaseLayout(debs, tmp); err != nil {
		return "", fmt.Errorf("building the base image from %s: %w", filepath.Dir(debs[0]), err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "index.json")); statErr == nil {
			return dir, nil // another process won the race
		}
		return "", err
	}
	return dir, nil
}

// busyboxDebs finds busybox-static_<version>_<debArch>.deb in dir for every
// base platform, in basePlatforms order.
func busyboxDebs(dir string) ([]string, error) {
	var debs, missing []string
	for _, p := range basePlatforms {
		matches, err := filepath.Glob(filepath.Join(dir, "busybox-static_*_"+p.debArch+".deb"))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			missing = append(missing, p.debArch)
			continue
		}
		sort.Strings(matches)
		debs = append(debs, matches[len(matches)-1])
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the bed's base image needs Debian's busybox-static for %s in %s: run `make tools` (or `hack/tools.sh busybox`)",
			strings.Join(missing, ", "), dir)
	}
	return debs, nil
}

// buildBaseLayout writes the base image as an OCI layout into dir, one image
// per debs[i] for basePlatforms[i], and returns the digest of the index.
func buildBaseLayout(debs []string, dir string) (digest.Digest, error) {
	w := layoutWriter{dir: dir}
	index := ocispec.Index{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
	}
	for i, p := range basePlatforms {
		busybox, err := debFile(debs[i], "bin/busybox")
		if err != nil {
			return "", fmt.Errorf("%s: %w", filepath.Base(debs[i]), err)
		}
		desc, err := w.image(p, busybox, filepath.Base(debs[i]))
		if err != nil {
			return "", err
		}
		index.Manifests = append(index.Manifests, desc)
	}
	indexDesc, err := w.blob(ocispec.MediaTypeImageIndex, index)
	if err != nil {
		return "", err
	}
	indexDesc.Annotations = map[string]string{ocispec.AnnotationRefName: baseImageTag}
	top := ocispec.Index{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{indexDesc},
	}
	if err := w.json(ocispec.ImageLayoutFile, ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion}); err != nil {
		return "", err
	}
	// index.json last: its presence marks a complete layout.
	if err := w.json(ocispec.ImageIndexFile, top); err != nil {
		return "", err
	}
	return indexDesc.Digest, nil
}

// layoutWriter writes blobs and files of an OCI layout.
type layoutWriter struct {
	dir string
}

// image writes the layer, config and manifest of one platform's image and
// returns the manifest's descriptor for the index.
func (w layoutWriter) image(p basePlatform, busybox []byte, deb string) (ocispec.Descriptor, error) {
	layer, diffID, err := busyboxLayer(busybox)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layerDesc, err := w.blob(ocispec.MediaTypeImageLayerGzip, layer)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	platform := ocispec.Platform{OS: "linux", Architecture: p.arch, Variant: p.variant}
	config := ocispec.Image{
		Created:  &baseImageEpoch,
		Platform: platform,
		Config: ocispec.ImageConfig{
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{"sh"},
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		History: []ocispec.History{{
			Created:   &baseImageEpoch,
			CreatedBy: "archway test bed: /bin/busybox from " + deb,
		}},
	}
	configDesc, err := w.blob(ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifestDesc, err := w.blob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifestDesc.Platform = &platform
	return manifestDesc, nil
}

// blob stores content (bytes as they are, anything else as JSON) under
// blobs/sha256 and describes it.
func (w layoutWriter) blob(mediaType string, content any) (ocispec.Descriptor, error) {
	data, ok := content.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(content); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	d := digest.FromBytes(data)
	blobs := filepath.Join(w.dir, "blobs", d.Algorithm().String())
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := os.WriteFile(filepath.Join(blobs, d.Encoded()), data, 0o644); err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}, nil
}

func (w layoutWriter) json(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(w.dir, name), data, 0o644)
}

// busyboxLayer returns the base image's only layer, gzipped, and the digest
// of its uncompressed tar (the config's diff ID): /bin/busybox, the applet
// links, root's /etc/passwd and /etc/group, and /tmp.
func busyboxLayer(busybox []byte) (layer []byte, diffID digest.Digest, err error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	entry := func(h *tar.Header, content []byte) {
		if err != nil {
			return
		}
		h.ModTime = baseImageEpoch
		h.Uname, h.Gname = "root", "root"
		if content != nil {
			h.Size = int64(len(content))
		}
		if err = tw.WriteHeader(h); err == nil && content != nil {
			_, err = tw.Write(content)
		}
	}
	dir := func(name string, mode int64) {
		entry(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}, nil)
	}
	file := func(name string, mode int64, content []byte) {
		entry(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, content)
	}
	dir("bin/", 0o755)
	file("bin/busybox", 0o755, busybox)
	for _, applet := range busyboxApplets {
		entry(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777}, nil)
	}
	dir("etc/", 0o755)
	file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	dir("root/", 0o700)
	dir("tmp/", 0o1777)
	if err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz) // no name, no mtime: deterministic
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), digest.FromBytes(tarBuf.Bytes()), nil
}

// debFile returns the contents of one regular file (e.g. "bin/busybox") of
// a Debian package's data archive.
func debFile(deb, name string) ([]byte, error) {
	f, err := os.Open(deb)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	member, data, err := arMember(bufio.NewReader(f), "data.tar")
	if err != nil {
		return nil, err
	}
	var tarStream io.Reader
	switch ext := strings.TrimPrefix(member, "data.tar"); ext {
	case "":
		tarStream = data
	case ".xz":
		if tarStream, err = xz.NewReader(data); err != nil {
			return nil, fmt.Errorf("%s: %w", member, err)
		}
	case ".gz":
		if tarStream, err = gzip.NewReader(data); err != nil {
			return nil, fmt.Errorf("%s: %w", member, err)
		}
	default:
		return nil, fmt.Errorf("%s: unsupported compression %q", member, ext)
	}
	tr := tar.NewReader(tarStream)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no %s", member, name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", member, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// arMember finds the first member of a Unix ar archive (the container of a
// .deb) whose name starts with prefix, and returns its name and a reader of
// its contents.
func arMember(r io.Reader, prefix string) (string, io.Reader, error) {
	magic := make([]byte, 8)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != "!<arch>\n" {
		return "", nil, errors.New("not an ar archive")
	}
	// Each member: a 60-byte header (name 16, mtime 12, uid 6, gid 6,
	// mode 8, size 10, "`\n"), the data, and a pad byte after odd sizes.
	header := make([]byte, 60)
	for {
		if _, err := io.ReadFull(r, header); err != nil {
			if errors.Is(err, io.EOF) {
				return "", nil, fmt.Errorf("no %s* member", prefix)
			}
			return "", nil, fmt.Errorf("reading ar header: %w", err)
		}
		if string(header[58:60]) != "`\n" {
			return "", nil, errors.New("corrupt ar header")
		}
		name := strings.TrimSuffix(strings.TrimRight(string(header[0:16]), " "), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(header[48:58])), 10, 64)
		if err != nil || size < 0 {
			return "", nil, fmt.Errorf("ar member %q: bad size %q", name, header[48:58])
		}
		if strings.HasPrefix(name, prefix) {
			return name, io.LimitReader(r, size), nil
		}
		if _, err := io.CopyN(io.Discard, r, size+size%2); err != nil {
			return "", nil, fmt.Errorf("ar member %q: %w", name, err)
		}
	}
}

// PushBasePlatform pushes the base image's image of one platform
// ("linux/arm64") to ref, a tag in r, digests unchanged, as a platform's
// build pod pushes its image; it returns the pushed manifest's digest.
func (b *Bed) PushBasePlatform(ctx context.Context, r *Registry, ref, platform string) (digest.Digest, error) {
	parts := strings.Split(platform, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return "", fmt.Errorf("platform %q: want os/arch[/variant]", platform)
	}
	src, err := docker.ParseReference("//" + b.BaseImage)
	if err != nil {
		return "", err
	}
	dest, err := docker.ParseReference("//" + ref)
	if err != nil {
		return "", err
	}
	srcSys := b.Registry.SystemContext()
	srcSys.OSChoice, srcSys.ArchitectureChoice = parts[0], parts[1]
	if len(parts) == 3 {
		srcSys.VariantChoice = parts[2]
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = policy.Destroy() }()
	raw, err := copy.Image(ctx, policy, dest, src, &copy.Options{
		ImageListSelection: copy.CopySystemImage,
		PreserveDigests:    true,
		SourceCtx:          srcSys,
		DestinationCtx:     r.SystemContext(),
	})
	if err != nil {
		return "", fmt.Errorf("pushing the base image's %s to %s: %w", platform, ref, err)
	}
	return digest.FromBytes(raw), nil
}
