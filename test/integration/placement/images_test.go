package placement

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/opencontainers/go-digest"
	imgspec "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/archway-build/archway/test/bed"
)

// The test composes its images in Go and pushes them with the registry
// API: a config per platform, one empty layer shared by all, a manifest per
// platform and, for several platforms, an OCI index. Tiny images push in
// milliseconds and say exactly which platforms they have.

// pusher pushes to one registry of the bed, with its credentials if any.
type pusher struct {
	reg    *bed.Registry
	client *http.Client
	// labels are the config labels of the images it pushes.
	labels map[string]string
}

func newPusher(reg *bed.Registry) *pusher {
	return &pusher{reg: reg, client: reg.HTTPClient()}
}

// platform is "os/arch"; "unknown/unknown" makes a buildkit-style
// attestation entry.
type platform struct{ os, arch string }

func linux(arches ...string) []platform {
	out := make([]platform, len(arches))
	for i, a := range arches {
		out[i] = platform{"linux", a}
	}
	return out
}

// pushIndex pushes an OCI index of one tiny image per platform as
// repo:tag and returns the full reference.
func (p *pusher) pushIndex(ctx context.Context, repo, tag string, platforms ...platform) (string, error) {
	index := ocispec.Index{Versioned: imgspec.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for _, pl := range platforms {
		desc, err := p.pushImage(ctx, repo, pl, "")
		if err != nil {
			return "", err
		}
		desc.Platform = &ocispec.Platform{OS: pl.os, Architecture: pl.arch}
		if pl.os == "unknown" {
			desc.Annotations = map[string]string{"vnd.docker.reference.type": "attestation-manifest"}
		}
		index.Manifests = append(index.Manifests, desc)
	}
	data, err := json.Marshal(index)
	if err != nil {
		return "", err
	}
	if err := p.putManifest(ctx, repo, tag, ocispec.MediaTypeImageIndex, data); err != nil {
		return "", err
	}
	return p.reg.Host + "/" + repo + ":" + tag, nil
}

// pushSingle pushes one image (no index) as repo:tag.
func (p *pusher) pushSingle(ctx context.Context, repo, tag string, pl platform) (string, error) {
	if _, err := p.pushImage(ctx, repo, pl, tag); err != nil {
		return "", err
	}
	return p.reg.Host + "/" + repo + ":" + tag, nil
}

// pushImage pushes the blobs and the manifest of one image, under tag when
// set (else only by digest), and describes the manifest.
func (p *pusher) pushImage(ctx context.Context, repo string, pl platform, tag string) (ocispec.Descriptor, error) {
	layer, diffID, err := emptyLayer()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	config, err := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: pl.os, Architecture: pl.arch},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		Config:   ocispec.ImageConfig{Cmd: []string{"sh"}, Labels: p.labels},
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layerDesc, err := p.pushBlob(ctx, repo, ocispec.MediaTypeImageLayerGzip, layer)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	configDesc, err := p.pushBlob(ctx, repo, ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	d := digest.FromBytes(manifest)
	ref := d.String()
	if tag != "" {
		ref = tag
	}
	if err := p.putManifest(ctx, repo, ref, ocispec.MediaTypeImageManifest, manifest); err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: int64(len(manifest))}, nil
}

// emptyLayer is a gzipped empty tar and the digest of the tar.
func emptyLayer() ([]byte, digest.Digest, error) {
	var tarBuf bytes.Buffer
	if err := tar.NewWriter(&tarBuf).Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), digest.FromBytes(tarBuf.Bytes()), nil
}

func (p *pusher) pushBlob(ctx context.Context, repo, mediaType string, data []byte) (ocispec.Descriptor, error) {
	d := digest.FromBytes(data)
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
	resp, err := p.do(ctx, http.MethodHead, "/v2/"+repo+"/blobs/"+d.String(), "", nil)
	if err != nil {
		return desc, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return desc, nil
	}
	resp, err = p.do(ctx, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil)
	if err != nil {
		return desc, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return desc, fmt.Errorf("starting an upload to %s: %s", repo, resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return desc, err
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	resp, err = p.do(ctx, http.MethodPut, loc.RequestURI(), "application/octet-stream", data)
	if err != nil {
		return desc, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		return desc, fmt.Errorf("uploading a blob to %s: %s: %s", repo, resp.Status, body)
	}
	return desc, nil
}

func (p *pusher) putManifest(ctx context.Context, repo, ref, mediaType string, data []byte) error {
	resp, err := p.do(ctx, http.MethodPut, "/v2/"+repo+"/manifests/"+ref, mediaType, data)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("putting manifest %s:%s: %s: %s", repo, ref, resp.Status, body)
	}
	return nil
}

func (p *pusher) do(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, method, p.reg.URL(path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if p.reg.Username != "" {
		req.SetBasicAuth(p.reg.Username, p.reg.Password)
	}
	return p.client.Do(req)
}
