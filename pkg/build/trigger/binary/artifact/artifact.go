// Package artifact carries the input of a binary build (kubectl archway
// start-build --from-dir, --from-file, --from-archive) to every platform's
// build pod.
//
// OpenShift streams the archive into the standard input of the one build
// pod. A multi-platform Build has a pod per platform, started at different
// times on different nodes, so archway stores the archive once as an OCI
// artifact in the Build's output repository and the Build names it by
// digest (spec.source.binary.artifact); each platform's pod pulls the same
// bytes and checks them before extracting them. The user sends the archive
// to build-controller's binary-build endpoint (package binary) with their
// own Kubernetes credentials; build-controller, which reads the
// BuildConfig's push secret, writes the artifact (Store), so users need no
// registry credentials. Build pods read it with Download. The package
// depends on no Kubernetes client, so that the builder, which re-executes
// itself for build steps, starts without one.
//
// The artifact is an OCI image manifest with artifactType ArtifactType, the
// empty config, and one layer: the uploaded bytes (the archive, or the file
// for asFile) in a gzip stream without compression (LayerMediaType), so
// that it is uploaded as it arrives, never held in memory or on the
// controller's disk. A tag derived from its digest (Tag) keeps it from the
// registry's garbage collector until the builds have read it; every upload
// is a manifest of its own (UploadAnnotation), so its tag is one Build's.
package artifact

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/stream"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.podman.io/image/v5/docker/reference"

	"github.com/archway-build/archway/pkg/registry"
	regremote "github.com/archway-build/archway/pkg/registry/remote"
)

// The media types of the artifact.
const (
	// ArtifactType is the manifest's artifactType.
	ArtifactType = "application/vnd.archway.build.binary.v1"
	// LayerMediaType is the media type of its one layer: the uploaded
	// bytes in a gzip stream.
	LayerMediaType = "application/vnd.archway.build.binary.layer.v1+gzip"
	// emptyConfigMediaType is OCI's empty descriptor, the config of
	// artifacts that have none.
	emptyConfigMediaType = "application/vnd.oci.empty.v1+json"
)

// UploadAnnotation is the manifest annotation naming one upload (128
// random bits), which makes every upload's manifest, and so its tag,
// unique.
const UploadAnnotation = "build.archway.dev/binary-upload"

// emptyConfig is the empty descriptor's content.
var emptyConfig = []byte("{}")

// Tag is the tag that keeps the artifact of manifest digest dgst
// ("sha256:<hex>") in its repository: sha256-<hex>.binary.
func Tag(dgst string) string {
	return strings.Replace(dgst, ":", "-", 1) + ".binary"
}

// TagFor is the tag that keeps the artifact a Build's
// spec.source.binary.artifact names (repository@sha256:...), when it lives
// in the repository of output (the Build's output reference, where
// build-controller stores it); "" otherwise: nothing else is ever untagged
// as a binary input.
func TagFor(ref, output string) string {
	repo, dgst, ok := strings.Cut(ref, "@")
	outRepo, err := Repository(output)
	if !ok || err != nil || repo != outRepo || !strings.HasPrefix(dgst, "sha256:") {
		return ""
	}
	return repo + ":" + Tag(dgst)
}

// Repository is the repository of an image reference
// (registry/path, without tag or digest), as the artifact is stored in the
// output's repository.
func Repository(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	return named.Name(), nil
}

// Store uploads content as the artifact into repository (registry/path)
// and returns its reference by digest (repository@sha256:...). The content
// is streamed: a caller bounds it by the reader it passes (a read error
// fails the upload, and nothing is tagged).
func Store(ctx context.Context, access registry.Access, repository string, content io.Reader, title string) (string, error) {
	repo, opts, err := connect(ctx, access, repository)
	if err != nil {
		return "", err
	}
	cfg := static.NewLayer(emptyConfig, emptyConfigMediaType)
	if err := remote.WriteLayer(repo, cfg, opts...); err != nil {
		return "", explain(repository, access, err)
	}
	layer := stream.NewLayer(io.NopCloser(content), stream.WithCompressionLevel(gzip.NoCompression),
		stream.WithMediaType(LayerMediaType))
	if err := remote.WriteLayer(repo, layer, opts...); err != nil {
		return "", explain(repository, access, err)
	}
	layerDigest, err := layer.Digest()
	if err != nil {
		return "", err
	}
	layerSize, err := layer.Size()
	if err != nil {
		return "", err
	}
	cfgDigest, _ := cfg.Digest()
	// Each upload is its own manifest, so its own tag: two Builds started
	// from the same bytes each remove their own tag when they end, never
	// the other's input.
	upload := make([]byte, 16)
	if _, err := rand.Read(upload); err != nil {
		return "", err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Annotations: map[string]string{
			"org.opencontainers.image.created": time.Now().UTC().Format(time.RFC3339),
			UploadAnnotation:                   hex.EncodeToString(upload),
		},
		Config: v1.Descriptor{MediaType: emptyConfigMediaType, Size: int64(len(emptyConfig)), Digest: cfgDigest},
		Layers: []v1.Descriptor{{MediaType: LayerMediaType, Size: layerSize, Digest: layerDigest,
			Annotations: map[string]string{"org.opencontainers.image.title": title}}},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	dgst := "sha256:" + hex.EncodeToString(sum[:])
	if err := remote.Put(repo.Tag(Tag(dgst)), rawManifest(raw), opts...); err != nil {
		return "", explain(repository, access, err)
	}
	return repository + "@" + dgst, nil
}

// rawManifest is a manifest to put as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error) { return m, nil }

func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// ErrTampered is wrapped by the errors of an artifact whose bytes are not
// those its digest names.
var ErrTampered = errors.New("the registry returned bytes that do not match the digest")

// Download fetches the artifact ref (repository@sha256:...), which must be
// in repository, into a file in dir, checks that the manifest and the layer
// are the bytes their digests name and that the layer is at most maxBytes,
// and only then returns a reader of the content as uploaded (the caller
// closes it; the file is removed with dir). Nothing of an artifact that
// fails a check reaches the caller.
func Download(ctx context.Context, access registry.Access, ref, repository, dir string, maxBytes int64) (io.ReadCloser, error) {
	d, err := name.NewDigest(ref, regremote.NameOptions(access, ref)...)
	if err != nil {
		return nil, fmt.Errorf("the binary input %q is not a reference by digest: %w", ref, err)
	}
	want, err := Repository(ref)
	if err != nil {
		return nil, err
	}
	if want != repository {
		return nil, fmt.Errorf("the binary input %s is not in the output's repository %s", ref, repository)
	}
	_, opts, err := connect(ctx, access, repository)
	if err != nil {
		return nil, err
	}
	desc, err := remote.Get(d, opts...)
	if err != nil {
		return nil, explain(repository, access, err)
	}
	sum := sha256.Sum256(desc.Manifest)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.DigestStr() {
		return nil, fmt.Errorf("%w: the manifest of %s has digest %s", ErrTampered, ref, got)
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return nil, fmt.Errorf("the binary input %s: reading its manifest: %w", ref, err)
	}
	if m.ArtifactType != ArtifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		return nil, fmt.Errorf("%s is not a binary input (artifactType %s with one layer of %s)", ref, ArtifactType, LayerMediaType)
	}
	layer := m.Layers[0]
	// The gzip stream without compression adds 5 bytes per 64 KiB block.
	if limit := maxBytes + maxBytes/1024 + 1024; layer.Size > limit {
		return nil, fmt.Errorf("the binary input is %d bytes, over the limit of %d", layer.Size, maxBytes)
	}
	f, err := os.CreateTemp(dir, "binary-input-*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := fetchBlob(ctx, repository, d.Context().Digest(layer.Digest.String()), layer, f, opts); err != nil {
		return nil, explain(repository, access, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("the binary input %s: %w", ref, err)
	}
	ok = true
	return &fileReader{Reader: gz, f: f}, nil
}

// fetchBlob copies the layer's blob into f and checks its size and digest
// with a hash of its own as it writes.
func fetchBlob(ctx context.Context, repository string, d name.Digest, want v1.Descriptor, f *os.File, opts []remote.Option) error {
	l, err := remote.Layer(d, opts...)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, want.Size+1))
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	switch {
	case n != want.Size || (err == nil && got != want.Digest.String()):
		return fmt.Errorf("%w: the layer %s of %s is %d bytes with digest %s", ErrTampered, want.Digest, repository, n, got)
	case err != nil:
		if strings.Contains(err.Error(), "error verifying") {
			return fmt.Errorf("%w: %w", ErrTampered, err)
		}
		return err
	}
	return ctx.Err()
}

// fileReader reads the gzip stream of a downloaded layer and closes (and
// removes) its file.
type fileReader struct {
	io.Reader
	f *os.File
}

func (r *fileReader) Close() error {
	err := r.f.Close()
	_ = os.Remove(r.f.Name())
	return err
}

// connect returns the repository and the options to reach it
// (remote.Connect).
func connect(ctx context.Context, access registry.Access, repository string) (name.Repository, []remote.Option, error) {
	return regremote.Connect(ctx, access, repository)
}

// explain says which credentials a registry refused.
func explain(repository string, access registry.Access, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == 401 || terr.StatusCode == 403) {
		return fmt.Errorf("the registry refused the credentials for %s from %s: %w", repository, access.CredentialSource(), err)
	}
	return fmt.Errorf("%s: %w", repository, err)
}
