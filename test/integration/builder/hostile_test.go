package builder_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/platform"
)

// hostilePlant is what a hostile cache repository (or a broken registry)
// answers under the result tag of a build's inputs.
type hostilePlant struct {
	// plant puts it under the tag in the bed's registry, given the
	// build's own result there; nil when the registry would not keep it
	// and forged answers it instead.
	plant func(t *testing.T, h *hostileSetup)
	// whyOf is why, when it depends on what plant put.
	whyOf func(h *hostileSetup) string
	// forged answers the tag's manifest requests in a proxy in front of
	// the registry (which forwards everything else): the body, and the
	// size a HEAD says (the body's when 0). A nil body streams without end.
	forged     []byte
	forgedSize int64
	stream     bool
	// headDigest is the digest the proxy names for the tag, when not
	// the forged body's.
	headDigest digest.Digest
	// why is what the build's log says about it.
	why string
}

// hostileSetup is the build whose result tag is forged: its inputs, the
// layer cache's tag and the result the first build kept there.
type hostileSetup struct {
	c        resultBuild
	args     map[string]string
	repo     string // the cache repository's path in the registry
	tag      name.Tag
	first    resultOutcome
	kept     string           // the digest of the kept result's manifest
	manifest ocispec.Manifest // the kept result's
	raw      []byte           // and as the registry has it
	// manifestType is the media type of the build's manifests.
	manifestType string
	config       []byte // the kept result's config
	// bigConfig is the size of the config planted beyond the limit.
	bigConfig int64
}

// TestCachedResultHostile puts, under the result tag of a build's inputs
// (an OCI build and a Docker-format build, whose reuse it checks first),
// what an attacker who can push to the cache repository (or a broken
// registry) could answer: a manifest whose layers and config's diff IDs
// differ in number, a config beyond the size limit or whose descriptor lies
// about its size or of an artifact's type, an image index or a Docker
// manifest list, a manifest that is not JSON, of another type than the
// registry says, not of the digest the registry names, or larger than the
// limit (said by its size, or not said and streamed without end), a layer
// the registry does not have, of the other format or whose size its
// descriptor gets wrong. For each, the build does not use it, its log
// says why, it builds and pushes an image whose every blob the registry
// serves as its manifest describes it (read with containers/image), and
// the tag then names the build's own result, not the planted image. The
// manifests the registry does not keep (not JSON, of another type than
// said, not of the digest said, too large) are answered
// by a proxy in front of it.
func TestCachedResultHostile(t *testing.T) {
	for _, format := range []image.Format{image.FormatOCI, image.FormatDocker} {
		t.Run(string(format), func(t *testing.T) { cachedResultHostile(t, format) })
	}
}

// hostileTypes are the media types of a format's images, and those of
// the other format's.
type hostileTypes struct {
	manifest, config, otherManifest, otherLayer string
}

func cachedResultHostile(t *testing.T, format image.Format) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	types := hostileTypes{manifest: ocispec.MediaTypeImageManifest, config: ocispec.MediaTypeImageConfig,
		otherManifest: string(ggcrtypes.DockerManifestSchema2), otherLayer: string(ggcrtypes.DockerLayer)}
	if format == image.FormatDocker {
		types = hostileTypes{manifest: string(ggcrtypes.DockerManifestSchema2), config: string(ggcrtypes.DockerConfigJSON),
			otherManifest: ocispec.MediaTypeImageManifest, otherLayer: string(ggcrtypes.OCILayer)}
	}
	base := reg.Host + "/it/hostile-base:v1"
	_, err := theBed.PushBasePlatform(ctx, reg, base, "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	ctxDir := writeContext(t, resultDockerfile)
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("alpha\n"), 0o644)).To(Succeed())
	cacheRepo, err := platform.CacheRepository(reg.Host+"/it/hostile-"+string(format)+"-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	h := &hostileSetup{
		c:            resultBuild{t: t, ctxDir: ctxDir, cache: cacheRepo, dest: reg.Host + "/it/hostile-" + string(format) + ":v1", format: format},
		args:         map[string]string{"BASE": base},
		repo:         strings.TrimPrefix(cacheRepo, reg.Host+"/"),
		manifestType: types.manifest,
	}
	h.first = h.c.build("linux/amd64", "first", h.args, false)
	g.Expect(builtSteps(h.first.log)).To(BeTrue(), h.first.log)
	g.Expect(h.first.mediaType).To(Equal(types.manifest))
	g.Expect(h.first.layers).To(HaveLen(3))
	tags := resultTags(t, reg, cacheRepo)
	g.Expect(tags).To(HaveLen(1))
	h.tag, err = name.NewTag(cacheRepo+":"+tags[0], name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	h.kept, err = reg.ManifestDigest(ctx, h.repo, tags[0])
	g.Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(h.tag, remote.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	h.raw, err = img.RawManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Contains(h.raw, []byte(`"schemaVersion":2`))).To(BeTrue(), "%s", h.raw)
	g.Expect(json.Unmarshal(h.raw, &h.manifest)).To(Succeed())
	g.Expect(h.manifest.Config.MediaType).To(Equal(types.config))
	h.config, err = img.RawConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	again := h.c.build("linux/amd64", "again", h.args, false)
	g.Expect(builtSteps(again.log)).To(BeFalse(), "the kept result is reused as it is\n%s", again.log)
	g.Expect(again.layers).To(Equal(h.first.layers))
	g.Expect(again.mediaType).To(Equal(types.manifest))

	notJSON := []byte("this is not a manifest\n")
	for _, tc := range []struct {
		name string
		hostilePlant
	}{
		{"one layer more than diff IDs", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Layers = append(append([]ocispec.Descriptor{}, m.Layers...), m.Layers[len(m.Layers)-1])
			h.putManifest(t, m)
		}, why: "its manifest has 4 layers and its config 3"}},
		{"more layers than any image has", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Layers = nil
			for len(m.Layers) <= 256 {
				m.Layers = append(m.Layers, h.manifest.Layers...)
			}
			h.putManifest(t, m)
		}, why: "its manifest has 258 layers, more than 256"}},
		{"one layer fewer than diff IDs", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Layers = m.Layers[:len(m.Layers)-1]
			h.putManifest(t, m)
		}, why: "its manifest has 2 layers and its config 3"}},
		{"config larger than the limit", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			var cfg map[string]any
			g := NewWithT(t)
			g.Expect(json.Unmarshal(h.config, &cfg)).To(Succeed())
			cfg["comment"] = strings.Repeat("x", 8<<20)
			big, err := json.Marshal(cfg)
			g.Expect(err).NotTo(HaveOccurred())
			m := h.manifest
			m.Config = h.pushBlob(t, big, m.Config.MediaType)
			h.bigConfig = m.Config.Size
			h.putManifest(t, m)
		}, whyOf: func(h *hostileSetup) string {
			return fmt.Sprintf("its config has %d bytes, not 1 to %d", h.bigConfig, 8<<20)
		}}},
		{"config descriptor smaller than the blob", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Config.Size--
			h.putManifest(t, m)
		}, why: fmt.Sprintf("its config could not be read as its manifest describes it (%d bytes, %s)", len(h.config)-1, h.manifest.Config.Digest)}},
		{"config descriptor larger than the blob", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Config.Size++
			h.putManifest(t, m)
		}, why: fmt.Sprintf("its config could not be read as its manifest describes it (%d bytes, %s)", len(h.config)+1, h.manifest.Config.Digest)}},
		{"image index", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			h.putIndex(t, ggcrtypes.OCIImageIndex)
		}, why: "its manifest is an image index (application/vnd.oci.image.index.v1+json), not the build's image manifest (" + types.manifest + ")"}},
		{"Docker manifest list", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			h.putIndex(t, ggcrtypes.DockerManifestList)
		}, why: "its manifest is an image index (application/vnd.docker.distribution.manifest.list.v2+json), not the build's image manifest (" + types.manifest + ")"}},
		{"layer the registry does not have", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			// The registry keeps no manifest naming a blob it does not
			// have: the blob is pushed, the manifest, and the blob deleted.
			junk := make([]byte, 1024)
			_, _ = rand.Read(junk)
			m := h.manifest
			m.Layers = append([]ocispec.Descriptor{}, m.Layers...)
			m.Layers[1] = h.pushBlob(t, junk, m.Layers[1].MediaType)
			h.putManifest(t, m)
			h.deleteBlob(t, m.Layers[1].Digest)
		}, why: "its layer 1 (sha256:"},
		},
		{"layer descriptor smaller than the blob", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Layers = append([]ocispec.Descriptor{}, m.Layers...)
			m.Layers[2].Size--
			h.putManifest(t, m)
		}, why: fmt.Sprintf("its layer 2 has %d bytes in the cache repository, its manifest says %d", h.manifest.Layers[2].Size, h.manifest.Layers[2].Size-1)}},
		{"config of an artifact's type", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Config.MediaType = "application/vnd.example.config.v1+json"
			h.putManifest(t, m)
		}, why: "its config is a application/vnd.example.config.v1+json, not an image's config (" + types.config + ")"}},
		{"layer of the other format", hostilePlant{plant: func(t *testing.T, h *hostileSetup) {
			m := h.manifest
			m.Layers = append([]ocispec.Descriptor{}, m.Layers...)
			m.Layers[2].MediaType = types.otherLayer
			h.putManifest(t, m)
		}, why: fmt.Sprintf("its layer 2 is a %s, not a %s build's layer", types.otherLayer, format)}},
		{"manifest not JSON", hostilePlant{forged: notJSON, why: "its manifest is not a valid image manifest"}},
		{"manifest whose mediaType is not its Content-Type", hostilePlant{
			forged: bytes.Replace(h.raw, []byte(types.manifest), []byte(types.otherManifest), 1),
			why:    fmt.Sprintf("its manifest says it is a %s, not the build's %s", types.otherManifest, types.manifest)}},
		{"manifest not the digest the registry named", hostilePlant{
			forged:     bytes.Replace(h.raw, []byte(`"schemaVersion":2`), []byte(`"schemaVersion": 2`), 1),
			headDigest: digest.FromString("another manifest"),
			why:        "reading its manifest: manifest digest: "}},
		{"manifest larger than the limit", hostilePlant{stream: true, forgedSize: 64 << 20,
			why: fmt.Sprintf("its manifest has %d bytes, more than %d", 64<<20, 4<<20)}},
		{"manifest larger than the limit, its size not said", hostilePlant{stream: true, forgedSize: 1000,
			why: fmt.Sprintf("its manifest has more than %d bytes", 4<<20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.hostile(t, tc.hostilePlant)
		})
	}
}

// hostile plants p under the result tag, builds, and checks what the
// build did: the tag kept names the build's own result again.
func (h *hostileSetup) hostile(t *testing.T, p hostilePlant) {
	g := NewWithT(t)
	ctx := t.Context()
	reg := theBed.Registry
	c := h.c
	c.t = t
	var written atomic.Int64
	if p.plant != nil {
		p.plant(t, h)
		planted, err := reg.ManifestDigest(ctx, h.repo, h.tag.TagStr())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(planted).NotTo(Equal(h.kept), "planted")
	} else {
		proxyHost := h.forgingProxy(t, p, &written)
		c.cache = proxyHost + "/" + h.repo
	}
	out := c.build("linux/amd64", "hostile", h.args, false)
	if p.stream {
		// A manifest beyond the limit is not read beyond it. What the
		// proxy could write before the connection closed also sits in
		// the sockets' buffers, which can grow to net.ipv4.tcp_rmem's
		// and tcp_wmem's largest (32 and 4 MiB on our machines): 8-14 MiB
		// were written with the limit, over 100 MiB (go-containerregistry's
		// own limit) without it.
		bound := int64(4<<20) + socketBuffersMax(t) + 8<<20
		g.Expect(written.Load()).To(BeNumerically("<", bound), "the builder stopped reading the manifest at its limit")
		fmt.Printf("%s: the proxy wrote %d bytes of the manifest\n", t.Name(), written.Load())
	}
	g.Expect(out.log).To(ContainSubstring("Not reusing the layer cache's result "+c.cache+":"+h.tag.TagStr()+": "), out.log)
	why := p.why
	if p.whyOf != nil {
		why = p.whyOf(h)
	}
	g.Expect(out.log).To(ContainSubstring(why), out.log)
	for line := range strings.Lines(out.log) {
		if strings.HasPrefix(line, "Not reusing") {
			t.Log(strings.TrimSpace(line))
		}
	}
	g.Expect(builtSteps(out.log)).To(BeTrue(), "the planted image is not used\n%s", out.log)
	// The build's image: its own layers and config, every blob served as
	// its manifest describes it.
	g.Expect(out.layers).To(Equal(h.first.layers))
	g.Expect(out.config.RootFS.DiffIDs).To(Equal(h.first.config.RootFS.DiffIDs))
	g.Expect(out.config.Architecture).To(Equal("amd64"))
	g.Expect(out.labels).To(HaveKeyWithValue("io.openshift.build.name", "hostile"))
	checkBlobs(t, digestReferenceOf(h.c.dest, out.digest))
	// The build kept its result under the tag, in place of the planted
	// image: a later build reuses it.
	g.Expect(out.log).To(ContainSubstring("Kept the result as "+c.cache+":"+h.tag.TagStr()), out.log)
	now, err := reg.ManifestDigest(ctx, h.repo, h.tag.TagStr())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now).To(Equal(h.kept), "the tag names the build's result again")
	reused := h.c.build("linux/amd64", "reused", h.args, false)
	g.Expect(builtSteps(reused.log)).To(BeFalse(), "the result kept is reused\n%s", reused.log)
}

// putManifest puts m under the result tag.
func (h *hostileSetup) putManifest(t *testing.T, m ocispec.Manifest) {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	h.put(t, raw, m.MediaType)
}

// put puts raw, of mediaType, under the result tag.
func (h *hostileSetup) put(t *testing.T, raw []byte, mediaType string) {
	t.Helper()
	reg := theBed.Registry
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, reg.URL("/v2/"+h.repo+"/manifests/"+h.tag.TagStr()), bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mediaType)
	resp, err := reg.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("putting the manifest: %s: %s", resp.Status, body)
	}
}

// putIndex puts under the result tag an index of mediaType whose one
// entry is the build's own result, for its platform.
func (h *hostileSetup) putIndex(t *testing.T, mediaType ggcrtypes.MediaType) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	own, err := remote.Image(h.tag.Context().Digest(h.kept), remote.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, mediaType),
		mutate.IndexAddendum{Add: own, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	g.Expect(remote.WriteIndex(h.tag, idx, remote.WithContext(ctx))).To(Succeed())
}

// pushBlob pushes content to the cache repository and returns its
// descriptor, of mediaType.
func (h *hostileSetup) pushBlob(t *testing.T, content []byte, mediaType string) ocispec.Descriptor {
	t.Helper()
	layer := static.NewLayer(content, ggcrtypes.MediaType(mediaType))
	if err := remote.WriteLayer(h.tag.Context(), layer, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(content), Size: int64(len(content))}
}

// deleteBlob removes d from the cache repository.
func (h *hostileSetup) deleteBlob(t *testing.T, d digest.Digest) {
	t.Helper()
	reg := theBed.Registry
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, reg.URL("/v2/"+h.repo+"/blobs/"+d.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := reg.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("deleting blob %s: %s", d, resp.Status)
	}
}

// forgingProxy starts a proxy in front of the bed's registry that answers
// the result tag's manifest requests (and those of the digest it gives
// for it) with p's forged manifest and forwards every other request; it
// counts the forged bytes written in written. It returns the proxy's host.
func (h *hostileSetup) forgingProxy(t *testing.T, p hostilePlant, written *atomic.Int64) string {
	t.Helper()
	target, err := url.Parse(theBed.Registry.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	// A streamed manifest has no digest a body could match; the digest
	// given is that of the manifest's first megabyte.
	chunk := bytes.Repeat([]byte(`{"schemaVersion":2,"annotations":{"a":"`), (1<<20)/39)
	fakeDigest := digest.FromBytes(chunk)
	if p.forged != nil {
		fakeDigest = digest.FromBytes(p.forged)
	}
	if p.headDigest != "" {
		fakeDigest = p.headDigest
	}
	size := p.forgedSize
	if size == 0 {
		size = int64(len(p.forged))
	}
	forged := map[string]bool{
		"/v2/" + h.repo + "/manifests/" + h.tag.TagStr():      true,
		"/v2/" + h.repo + "/manifests/" + fakeDigest.String(): true,
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !forged[r.URL.Path] || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			forward.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", h.manifestType)
		w.Header().Set("Docker-Content-Digest", fakeDigest.String())
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			return
		}
		if !p.stream {
			n, _ := w.Write(p.forged)
			written.Add(int64(n))
			return
		}
		// Without end (up to 256 MiB): until the client stops reading.
		for written.Load() < 256<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(proxy.Close)
	return strings.TrimPrefix(proxy.URL, "http://")
}

// checkBlobs reads every blob of the image ref (host/repo@digest) in the
// bed's registry with containers/image and checks that each has the
// digest and size its manifest gives.
func checkBlobs(t *testing.T, ref string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	imgRef, err := docker.ParseReference("//" + ref)
	g.Expect(err).NotTo(HaveOccurred())
	src, err := imgRef.NewImageSource(ctx, theBed.Registry.SystemContext())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = src.Close() }()
	raw, _, err := src.GetManifest(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var m ocispec.Manifest
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: d.Digest, Size: d.Size}, none.NoCache)
		g.Expect(err).NotTo(HaveOccurred(), "blob %s of %s", d.Digest, ref)
		verifier := d.Digest.Verifier()
		n, err := io.Copy(verifier, rc)
		_ = rc.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(d.Size), "blob %s of %s has the size its manifest gives", d.Digest, ref)
		g.Expect(verifier.Verified()).To(BeTrue(), "blob %s of %s has its digest", d.Digest, ref)
	}
}

// socketBuffersMax is the most a TCP connection's receive and send buffers
// can hold on this machine (the largest of net.ipv4.tcp_rmem and
// tcp_wmem): what a server can write that its client never read.
func socketBuffersMax(t *testing.T) int64 {
	var total int64
	for _, f := range []string{"/proc/sys/net/ipv4/tcp_rmem", "/proc/sys/net/ipv4/tcp_wmem"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(data))
		n, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		total += n
	}
	if total > 80<<20 {
		t.Logf("socket buffers of up to %d bytes: a manifest read without a limit (go-containerregistry stops at 100 MiB) may not be told from one read with it", total)
	}
	return total
}
