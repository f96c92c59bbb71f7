package bed

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/types"
)

// pushedIndex opens the base image in r and reads its index, from the
// registry rather than from the local layout.
func pushedIndex(t *testing.T, ctx context.Context, r *Registry, ref string) (types.ImageSource, *manifest.OCI1Index, digest.Digest) {
	t.Helper()
	src, err := dockerRef(t, ref).NewImageSource(ctx, r.SystemContext())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	blob, mimeType, err := src.GetManifest(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mimeType != ocispec.MediaTypeImageIndex {
		t.Fatalf("%s is a %s, want an OCI index", ref, mimeType)
	}
	index, err := manifest.OCI1IndexFromManifest(blob)
	if err != nil {
		t.Fatal(err)
	}
	d, err := manifest.Digest(blob)
	if err != nil {
		t.Fatal(err)
	}
	return src, index, d
}

func platformString(p *ocispec.Platform) string {
	if p == nil {
		return "<no platform>"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// child reads the manifest and config of one platform's image.
func child(t *testing.T, ctx context.Context, src types.ImageSource, desc ocispec.Descriptor) (*manifest.OCI1, ocispec.Image) {
	t.Helper()
	blob, _, err := src.GetManifest(ctx, &desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.OCI1FromManifest(blob)
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: m.Config.Digest, Size: m.Config.Size}, none.NoCache)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var config ocispec.Image
	if err := json.NewDecoder(rc).Decode(&config); err != nil {
		t.Fatal(err)
	}
	return m, config
}

// TestBaseImageIndex seeds a registry and checks, from the registry, that
// the index lists every platform and each child's config says its platform
// and runs sh.
func TestBaseImageIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), CaseTimeout)
	defer cancel()
	r := testRegistry(t, ctx, "registry", false)
	layoutDir, err := baseImageLayout() // built here if the cache is cold, so the timing below is warm
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ref, err := SeedBaseImage(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %s from %s in %v", ref, layoutDir, time.Since(start).Round(time.Millisecond))
	if want := r.Host + "/archway/busybox:latest"; ref != want {
		t.Errorf("SeedBaseImage returned %q, want %q", ref, want)
	}

	src, index, indexDigest := pushedIndex(t, ctx, r, ref)
	var platforms []string
	for _, desc := range index.Manifests {
		platforms = append(platforms, platformString(desc.Platform))
		m, config := child(t, ctx, src, desc)
		if got := platformString(&config.Platform); got != platformString(desc.Platform) {
			t.Errorf("the index lists %s for %s, whose config says %s", platformString(desc.Platform), desc.Digest, got)
		}
		if !slices.Equal(config.Config.Cmd, []string{"sh"}) {
			t.Errorf("%s: Cmd = %q, want [sh]", platformOf(config), config.Config.Cmd)
		}
		if !slices.ContainsFunc(config.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") && strings.Contains(e, "/bin") }) {
			t.Errorf("%s: Env = %q, want a PATH with /bin", platformOf(config), config.Config.Env)
		}
		if len(m.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 {
			t.Errorf("%s: %d layers and %d diff IDs, want one layer", platformOf(config), len(m.Layers), len(config.RootFS.DiffIDs))
		}
	}
	want := []string{"linux/amd64", "linux/arm64/v8", "linux/arm/v7", "linux/ppc64le", "linux/s390x"}
	if !slices.Equal(platforms, want) || !slices.Equal(BaseImagePlatforms(), want) {
		t.Errorf("the index lists %q and BaseImagePlatforms says %q, want %q", platforms, BaseImagePlatforms(), want)
	}

	cached, err := layoutIndexDigest(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	if indexDigest != cached {
		t.Errorf("the registry holds index %s, the cached layout %s: the push changed digests", indexDigest, cached)
	}
}

func platformOf(config ocispec.Image) string { return platformString(&config.Platform) }

// layoutIndexDigest reads the digest of the tagged index of an OCI layout.
func layoutIndexDigest(dir string) (digest.Digest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))
	if err != nil {
		return "", err
	}
	var top ocispec.Index
	if err := json.Unmarshal(data, &top); err != nil {
		return "", err
	}
	for _, desc := range top.Manifests {
		if desc.Annotations[ocispec.AnnotationRefName] == baseImageTag {
			return desc.Digest, nil
		}
	}
	return "", errors.New(dir + " has no " + baseImageTag)
}

// TestBaseImageDeterministic builds the layout twice from the same .debs:
// the digests must match each other and the cached layout, or every bed
// would push a different image.
func TestBaseImageDeterministic(t *testing.T) {
	debs, err := busyboxDebs(filepath.Join(CacheDir(), "debs"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := buildBaseLayout(debs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	second, err := buildBaseLayout(debs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := baseImageLayout()
	if err != nil {
		t.Fatal(err)
	}
	cached, err := layoutIndexDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first != second || first != cached {
		t.Errorf("builds from the same .debs gave %s, %s and cached %s", first, second, cached)
	}
}

// TestBaseImageMissingDebs checks that a machine without the .debs is told
// what to run.
func TestBaseImageMissingDebs(t *testing.T) {
	_, err := busyboxDebs(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), "ppc64el") {
		t.Errorf("busyboxDebs of an empty directory: %v, want an error naming ppc64el and `make tools`", err)
	}
}

// TestBaseImageRunsUnderQemu unpacks each platform's layer as pushed and
// runs its sh: under qemu for the foreign ones, `uname -m` must print the
// platform's machine.
func TestBaseImageRunsUnderQemu(t *testing.T) {
	if err := CheckQemu(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), CaseTimeout)
	defer cancel()
	r := testRegistry(t, ctx, "registry", false)
	ref, err := SeedBaseImage(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	src, index, _ := pushedIndex(t, ctx, r, ref)
	machines := map[string]string{
		"linux/amd64":    "x86_64",
		"linux/arm64/v8": "aarch64",
		"linux/arm/v7":   "armv7l",
		"linux/ppc64le":  "ppc64le",
		"linux/s390x":    "s390x",
	}
	for _, desc := range index.Manifests {
		platform := platformString(desc.Platform)
		t.Run(strings.ReplaceAll(platform, "/", "_"), func(t *testing.T) {
			want, ok := machines[platform]
			if !ok {
				t.Fatalf("unexpected platform %s in the index", platform)
			}
			m, _ := child(t, ctx, src, desc)
			rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: m.Layers[0].Digest, Size: m.Layers[0].Size}, none.NoCache)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			root := t.TempDir()
			modes := unpackLayer(t, rc, root)
			if modes["tmp"] != os.ModeDir|os.ModePerm|os.ModeSticky {
				t.Errorf("/tmp has mode %v, want drwxrwxrwt", modes["tmp"])
			}
			cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "sh"), "-c", "uname -m")
			cmd.Env = []string{"PATH=" + filepath.Join(root, "bin")}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: sh -c 'uname -m': %v: %s", platform, err, out)
			}
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("%s: uname -m printed %q, want %q", platform, got, want)
			}
		})
	}
}

// unpackLayer extracts a gzipped layer into root and returns the mode of
// every entry by its path.
func unpackLayer(t *testing.T, layer io.Reader, root string) map[string]os.FileMode {
	t.Helper()
	zr, err := gzip.NewReader(layer)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]os.FileMode{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return modes
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("layer entry %q escapes the root", h.Name)
		}
		modes[name] = h.FileInfo().Mode()
		path := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, h.FileInfo().Mode().Perm())
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, path)
		default:
			t.Fatalf("unexpected layer entry %q of type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSeedBaseImage measures what a bed pays for its base image with a
// warm cache: one push of the cached layout into a fresh registry.
func BenchmarkSeedBaseImage(b *testing.B) {
	ctx := b.Context()
	if _, err := baseImageLayout(); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		r, err := startRegistry(ctx, dir, "registry-"+strconv.Itoa(i), false, RegistryOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, err = SeedBaseImage(ctx, r)
		b.StopTimer()
		r.proc.Stop()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
