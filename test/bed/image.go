package bed

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/types"
)

// Image reads an image or an image index from one of the bed's registries,
// so that tests check what a build pushed from the registry itself.
type Image struct {
	reg *Registry
	ref string
	src types.ImageSource
}

// OpenImage opens ref ("host/repo:tag" or "host/repo@digest") in r. Close
// it when done.
func (r *Registry) OpenImage(ctx context.Context, ref string) (*Image, error) {
	imgRef, err := docker.ParseReference("//" + ref)
	if err != nil {
		return nil, err
	}
	src, err := imgRef.NewImageSource(ctx, r.SystemContext())
	if err != nil {
		return nil, err
	}
	return &Image{reg: r, ref: ref, src: src}, nil
}

// Close releases the image's registry connection.
func (i *Image) Close() { _ = i.src.Close() }

// Index returns the image index the reference names, as an OCI index
// whatever its media type, and that media type.
func (i *Image) Index(ctx context.Context) (*manifest.OCI1Index, string, error) {
	raw, mt, err := i.src.GetManifest(ctx, nil)
	if err != nil {
		return nil, "", err
	}
	if !manifest.MIMETypeIsMultiImage(mt) {
		return nil, mt, fmt.Errorf("%s is a %s, not an index", i.ref, mt)
	}
	list, err := manifest.ListFromBlob(raw, mt)
	if err != nil {
		return nil, mt, err
	}
	oci, err := manifest.ConvertListToMIMEType(list, ocispec.MediaTypeImageIndex)
	if err != nil {
		return nil, mt, err
	}
	return oci.(*manifest.OCI1Index), mt, nil
}

// IndexPlatforms returns the platforms (os/architecture) the index at ref
// lists, sorted.
func (r *Registry) IndexPlatforms(ctx context.Context, ref string) ([]string, error) {
	img, err := r.OpenImage(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	index, _, err := img.Index(ctx)
	if err != nil {
		return nil, err
	}
	var platforms []string
	for _, m := range index.Manifests {
		if m.Platform != nil {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	slices.Sort(platforms)
	return platforms, nil
}

// TopLayerFile returns the content of path in the topmost layer of the
// image d of the same repository (a child of the index) that holds it: what
// the last build step that wrote it left, read from the layers themselves
// rather than from any metadata. A build keeps a layer per step
// (imageOptimizationPolicy None) or one for all its steps (SkipLayers).
func (i *Image) TopLayerFile(ctx context.Context, d digest.Digest, path string) (string, error) {
	raw, mt, err := i.src.GetManifest(ctx, &d)
	if err != nil {
		return "", err
	}
	m, err := manifest.FromBlob(raw, mt)
	if err != nil {
		return "", err
	}
	layers := m.LayerInfos()
	if len(layers) == 0 {
		return "", fmt.Errorf("image %s has no layers", d)
	}
	for l := len(layers) - 1; l >= 0; l-- {
		data, found, err := i.layerFile(ctx, layers[l], path)
		if err != nil || found {
			return data, err
		}
	}
	return "", fmt.Errorf("no %s in the layers of %s", path, d)
}

// OnlyTopLayerFile returns the content of path in the top layer of the image
// d itself, an error when that layer does not hold it.
func (i *Image) OnlyTopLayerFile(ctx context.Context, d digest.Digest, path string) (string, error) {
	raw, mt, err := i.src.GetManifest(ctx, &d)
	if err != nil {
		return "", err
	}
	m, err := manifest.FromBlob(raw, mt)
	if err != nil {
		return "", err
	}
	layers := m.LayerInfos()
	if len(layers) == 0 {
		return "", fmt.Errorf("image %s has no layers", d)
	}
	data, found, err := i.layerFile(ctx, layers[len(layers)-1], path)
	if err == nil && !found {
		err = fmt.Errorf("no %s in the top layer of %s", path, d)
	}
	return data, err
}

// LayerEntry is one entry of one of an image's layers.
type LayerEntry struct {
	// Layer is the layer's index, 0 the base's lowest.
	Layer int
	// Name is the entry's path, without a leading "./" or "/".
	Name string
	// Content is a regular file's content.
	Content []byte
	// UID and GID own the entry, as the image records them.
	UID, GID int
}

// LayerEntries returns every entry of every layer of the image d of the
// same repository (a child of the index): what a pull of it would bring,
// whiteouts and files later layers remove included.
func (i *Image) LayerEntries(ctx context.Context, d digest.Digest) ([]LayerEntry, error) {
	raw, mt, err := i.src.GetManifest(ctx, &d)
	if err != nil {
		return nil, err
	}
	m, err := manifest.FromBlob(raw, mt)
	if err != nil {
		return nil, err
	}
	var out []LayerEntry
	for n, layer := range m.LayerInfos() {
		err := i.walkLayer(ctx, layer, func(hdr *tar.Header, r io.Reader) (bool, error) {
			e := LayerEntry{Layer: n, Name: strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/"), UID: hdr.Uid, GID: hdr.Gid}
			if hdr.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(r)
				if err != nil {
					return false, err
				}
				e.Content = data
			}
			out = append(out, e)
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// layerFile returns the content of path in one layer, and whether the
// layer holds it.
func (i *Image) layerFile(ctx context.Context, layer manifest.LayerInfo, path string) (string, bool, error) {
	var data string
	found := false
	err := i.walkLayer(ctx, layer, func(hdr *tar.Header, r io.Reader) (bool, error) {
		if strings.TrimPrefix(hdr.Name, "./") != strings.TrimPrefix(path, "/") {
			return false, nil
		}
		content, err := io.ReadAll(r)
		data, found = string(content), true
		return true, err
	})
	return data, found, err
}

// walkLayer calls fn for each entry of layer, until fn says it is done.
func (i *Image) walkLayer(ctx context.Context, layer manifest.LayerInfo, fn func(*tar.Header, io.Reader) (bool, error)) error {
	blob, _, err := i.src.GetBlob(ctx, layer.BlobInfo, none.NoCache)
	if err != nil {
		return err
	}
	defer func() { _ = blob.Close() }()
	var rd io.Reader = blob
	if strings.Contains(layer.MediaType, "gzip") {
		gz, err := gzip.NewReader(blob)
		if err != nil {
			return err
		}
		defer func() { _ = gz.Close() }()
		rd = gz
	}
	tr := tar.NewReader(rd)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if done, err := fn(hdr, tr); done || err != nil {
			return err
		}
	}
}

// Labels returns the labels of the image the reference names.
func (i *Image) Labels(ctx context.Context) (map[string]string, error) {
	img, err := image.FromUnparsedImage(ctx, i.reg.SystemContext(), image.UnparsedInstance(i.src, nil))
	if err != nil {
		return nil, err
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return nil, err
	}
	return cfg.Config.Labels, nil
}

// Config returns the config of the image the reference names: its
// environment, labels and the digests of its layers' contents (rootfs
// diff IDs), which are the same for the same layer however it was
// compressed.
func (i *Image) Config(ctx context.Context) (*ocispec.Image, error) {
	img, err := image.FromUnparsedImage(ctx, i.reg.SystemContext(), image.UnparsedInstance(i.src, nil))
	if err != nil {
		return nil, err
	}
	return img.OCIConfig(ctx)
}

// Manifest returns the manifest the reference names and its media type.
func (i *Image) Manifest(ctx context.Context) ([]byte, string, error) {
	return i.src.GetManifest(ctx, nil)
}
