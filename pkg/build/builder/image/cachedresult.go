package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/buildah"
	"go.podman.io/buildah/define"
	"golang.org/x/sync/errgroup"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
	regremote "github.com/archway-build/archway/pkg/registry/remote"
)

// Whole results in the layer cache. A build with a layer cache
// (Request.Cache) that BuildAndPush pushes, and whose inputs can all be
// digested (the result key of result.go, taken without Request.Labels),
// keeps its image without the labels in the cache repository under
// cachedResultTag(key), and the image it pushes to its destination is that
// image with the labels added to its config (an empty layer in its
// history, as a LABEL step gives). A later build of the same inputs, in
// any work directory (a build pod starts with an empty one), finds the tag
// and builds nothing: it reads the cached manifest and config, checks
// them, and pushes the labelled config and a manifest naming the same
// layers, which the registry mounts from the cache repository when both
// are on it (no layer goes through the builder). NoCache builds again and
// replaces the tag.
//
// The key is only a name to look the result up by: whoever may push to the
// cache repository can put any image under it, as they can under the
// per-step tags buildah reads, so a cache repository must be writable only
// by those trusted to build. What is checked is what can be: the manifest
// is the one read (by digest), an image manifest (not an index) of the
// build's format, of bounded size (read no further than the limit,
// whatever the registry says of its size), with an image config (not an
// artifact's) of bounded size
// recording the target platform (its variant too) and one layer per diff
// ID, every layer of the format's own rootfs types, without URLs, and in
// the cache repository with the size the manifest gives (a HEAD request
// each: the push names the layers without reading them). A layer's
// content is not read, so a layer whose blob is not what its diff ID says
// is not found.

// cachedResultTagPrefix starts the tag of a cached result; the rest is the
// key, 64 hexadecimal digits.
const cachedResultTagPrefix = "result-"

// rootfsLayerTypes are the layer media types a cached result of each
// format may have.
var rootfsLayerTypes = map[Format][]ggcrtypes.MediaType{
	FormatOCI:    {ggcrtypes.OCILayer, ggcrtypes.OCILayerZStd, ggcrtypes.OCIUncompressedLayer},
	FormatDocker: {ggcrtypes.DockerLayer, ggcrtypes.DockerUncompressedLayer},
}

// imageConfigTypes is the config media type of each format's images.
var imageConfigTypes = map[Format]ggcrtypes.MediaType{
	FormatOCI:    ggcrtypes.OCIConfigJSON,
	FormatDocker: ggcrtypes.DockerConfigJSON,
}

// cachedResultTag is the tag of the result whose inputs have key.
func cachedResultTag(key string) string { return cachedResultTagPrefix + key }

// cachedResult is an image of the layer cache, read and checked.
type cachedResult struct {
	ref    name.Digest // the manifest read, by digest
	image  v1.Image
	config *v1.ConfigFile
	layers []v1.Descriptor
	opts   []remote.Option // to read from the cache repository
}

// errNoCachedResult says that the cache has no result under the tag.
var errNoCachedResult = errors.New("no cached result")

// findCachedResult returns the result the cache keeps under cacheTag, or
// nil when there is none or it cannot be used (said in out).
func (b *Builder) findCachedResult(ctx context.Context, req Request, cacheTag string, target platform.Platform, out io.Writer) *cachedResult {
	res, err := b.readCachedResult(ctx, cacheTag, req.Cache.Auth, req.Format, target)
	if err == nil {
		// The push names the layers without reading them: one the cache
		// repository lacks would fail it, one of another size would be
		// pushed with a manifest no pull accepts.
		err = res.checkLayers(ctx)
	}
	switch {
	case errors.Is(err, errNoCachedResult):
		_, _ = fmt.Fprintf(out, "No earlier result of the same inputs in the layer cache (%s): building\n", cacheTag)
		return nil
	case err != nil:
		_, _ = fmt.Fprintf(out, "Not reusing the layer cache's result %s: %v; building\n", cacheTag, err)
		return nil
	}
	_, _ = fmt.Fprintf(out, "Reusing %s from the layer cache: an earlier build had the same inputs (Dockerfile, build context, "+
		"build args, environment, base image digests, format, platform and builder version); no step runs\n", res.ref)
	return res
}

// readCachedResult reads the image ref names (a tag or a digest) with the
// credentials of auth and checks it: an image manifest of format, of
// bounded size, whose config records target.
func (b *Builder) readCachedResult(ctx context.Context, ref string, auth registry.AuthFile, format Format, target platform.Platform) (*cachedResult, error) {
	access := registry.Access{AuthFile: auth, InsecureRegistries: b.cfg.InsecureRegistries, CertDir: b.cfg.CertDir, UserAgent: "archway-builder"}
	e, err := regremote.Resolve(access, registryRepository(ref))
	if err != nil {
		return nil, err
	}
	repo := e.Repository
	// A manifest is read up to the limit, whatever the registry says of
	// its size beforehand.
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(e.Auth),
		remote.WithTransport(regremote.LimitAnswers(e.Transport, limitManifests))}
	// One puller authenticates once for every request below.
	puller, err := remote.NewPuller(opts...)
	if err != nil {
		return nil, err
	}
	opts = append(opts, remote.Reuse(puller))
	named, err := name.ParseReference(ref, regremote.NameOptions(access, ref)...)
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w", ref, err)
	}
	head, err := remote.Head(named, opts...)
	if err != nil {
		if terr := (*transport.Error)(nil); errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return nil, errNoCachedResult
		}
		return nil, err
	}
	if head.Size > regremote.MaxManifestSize {
		return nil, fmt.Errorf("its manifest has %d bytes, more than %d", head.Size, regremote.MaxManifestSize)
	}
	// The manifest is read by the digest the registry named, and checked
	// against it: what is checked below is what is pushed.
	d := repo.Digest(head.Digest.String())
	desc, err := remote.Get(d, opts...)
	if tooLarge := (*regremote.TooLargeError)(nil); errors.As(err, &tooLarge) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, fmt.Errorf("reading its manifest: %w", err)
	}
	if len(desc.Manifest) > regremote.MaxManifestSize {
		return nil, fmt.Errorf("its manifest has %d bytes, more than %d", len(desc.Manifest), regremote.MaxManifestSize)
	}
	if format == "" {
		format = FormatOCI
	}
	want := ggcrtypes.OCIManifestSchema1
	if format == FormatDocker {
		want = ggcrtypes.DockerManifestSchema2
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("its manifest is an image index (%s), not the build's image manifest (%s)", desc.MediaType, want)
	}
	if desc.MediaType != want {
		return nil, fmt.Errorf("its manifest is a %s, not the build's %s", desc.MediaType, want)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("its manifest is not a valid image manifest: %w", err)
	}
	if m.MediaType != "" && m.MediaType != want {
		return nil, fmt.Errorf("its manifest says it is a %s, not the build's %s", m.MediaType, want)
	}
	// An image's config: pulls refuse another type (an artifact's).
	if m.Config.MediaType != imageConfigTypes[format] {
		return nil, fmt.Errorf("its config is a %s, not an image's config (%s)", m.Config.MediaType, imageConfigTypes[format])
	}
	if m.Config.Size <= 0 || m.Config.Size > regremote.MaxConfigSize {
		return nil, fmt.Errorf("its config has %d bytes, not 1 to %d", m.Config.Size, regremote.MaxConfigSize)
	}
	// go-containerregistry reads the config's size and checks its digest.
	config, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("its config could not be read as its manifest describes it (%d bytes, %s): %w", m.Config.Size, m.Config.Digest, err)
	}
	// buildah records the target's variant: a config without one (or
	// with another) is not this build's, even where it would run.
	have := platform.FromOCI(ociPlatform(config))
	if config.OS == "" || config.Architecture == "" || !target.Equal(have) ||
		(config.Variant == "" && target.Normalize().Variant != "") {
		return nil, fmt.Errorf("its config records platform %q, not the target %s", have.String(), target.String())
	}
	if len(m.Layers) > maxCachedLayers {
		return nil, fmt.Errorf("its manifest has %d layers, more than %d", len(m.Layers), maxCachedLayers)
	}
	if len(m.Layers) != len(config.RootFS.DiffIDs) {
		return nil, fmt.Errorf("its manifest has %d layers and its config %d", len(m.Layers), len(config.RootFS.DiffIDs))
	}
	// Only layers a push uploads, of the format's own types: a layer
	// with URLs (foreign, non-distributable) would be left out of the
	// push and fetched by the pulls from wherever the URLs say.
	if err := checkCachedLayers(format, m.Layers); err != nil {
		return nil, err
	}
	return &cachedResult{ref: d, image: img, config: config, layers: m.Layers, opts: opts}, nil
}

// maxCachedLayers bounds the layers of a cached result: more than any
// image a Dockerfile gives (Docker stops at 127; an overlay mount at about
// 500), so that a result cannot make the lookup check without end.
const maxCachedLayers = 256

// maxLayerChecks is how many layers of a cached result are checked at once.
const maxLayerChecks = 8

// checkLayers fails unless the cache repository has every layer of r, of
// the size its manifest gives: a HEAD request each, no layer is read.
func (r *cachedResult) checkLayers(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxLayerChecks)
	for i, l := range r.layers {
		g.Go(func() error {
			// The first failure stops the checks not yet made.
			if err := gctx.Err(); err != nil {
				return err
			}
			return r.checkLayer(gctx, i, l)
		})
	}
	// The first failure, not the checks it stopped.
	return g.Wait()
}

// checkLayer fails unless the cache repository has layer i, l, of l's size.
func (r *cachedResult) checkLayer(ctx context.Context, i int, l v1.Descriptor) error {
	layer, err := remote.Layer(r.ref.Context().Digest(l.Digest.String()), append(slices.Clip(r.opts), remote.WithContext(ctx))...)
	if err != nil {
		return fmt.Errorf("its layer %d (%s): %w", i, l.Digest, err)
	}
	size, err := layer.Size()
	if terr := (*transport.Error)(nil); errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return fmt.Errorf("its layer %d (%s) is not in the cache repository %s", i, l.Digest, r.ref.Context().Name())
	}
	if err != nil {
		return fmt.Errorf("its layer %d (%s): %w", i, l.Digest, contextErr(ctx, err))
	}
	if size < 0 {
		return fmt.Errorf("its layer %d (%s): the cache repository does not say its size", i, l.Digest)
	}
	if size != l.Size {
		return fmt.Errorf("its layer %d has %d bytes in the cache repository, its manifest says %d", i, size, l.Size)
	}
	return nil
}

// limitManifests limits the manifests a cached result's reads fetch (and
// nothing else): a manifest is read no further than MaxManifestSize.
func limitManifests(first *http.Request) (int64, string) {
	if first.Method != http.MethodGet || regremote.PathKind(first.URL.Path) != regremote.ManifestPath {
		return 0, ""
	}
	return regremote.MaxManifestSize, "its manifest"
}

// checkCachedLayers fails unless every layer is of format's own rootfs
// layer types and names no URLs.
func checkCachedLayers(format Format, layers []v1.Descriptor) error {
	for i, l := range layers {
		if !slices.Contains(rootfsLayerTypes[format], l.MediaType) {
			return fmt.Errorf("its layer %d is a %s, not a %s build's layer", i, l.MediaType, format)
		}
		if len(l.URLs) > 0 {
			return fmt.Errorf("its layer %d names URLs to fetch it from", i)
		}
	}
	return nil
}

// pushWithLabels pushes the result of an unlabelled build (Result.unlabelled)
// to dest with req.Labels added: the cached image found, or else the built
// image, first pushed without the labels to its cache tag, or to dest when
// it is not to be kept. It fills out's Pushed and Image.
func (b *Builder) pushWithLabels(ctx context.Context, req Request, dest string, pushAuth registry.AuthFile, out *Output) error {
	start := time.Now()
	log := req.Out
	if log == nil {
		log = io.Discard
	}
	src := out.Build.cached
	srcAuth := req.Cache.Auth
	if src == nil {
		to := out.Build.cacheTag
		var pushed Pushed
		var err error
		if to != "" {
			// A registry that keeps tags immutable (or refuses this one)
			// costs later builds their reuse, not this build its push.
			if pushed, err = b.Push(ctx, out.Build.ImageID, to, req.Format, srcAuth, req.Out); err != nil {
				if ctx.Err() != nil {
					return err
				}
				_, _ = fmt.Fprintf(log, "Warning: the result is not kept in the layer cache: %v\n", err)
				to = ""
			}
		}
		if to == "" {
			// Not kept: the labels are added in the store and the image
			// pushed once, so the output's tag never names it unlabelled.
			return b.labelAndPush(ctx, req, dest, pushAuth, out, start)
		}
		if src, err = b.readCachedResult(ctx, digestReference(to, pushed.Digest), srcAuth, req.Format, out.Build.Platform); err != nil {
			return &StageError{Stage: StagePush, Err: fmt.Errorf("reading back %s: %w", to, err)}
		}
		_, _ = fmt.Fprintf(log, "Kept the result as %s for later builds of the same inputs\n", out.Build.cacheTag)
	}
	img, err := b.writeLabelled(ctx, src, dest, pushAuth, req.Labels)
	if err != nil {
		return &StageError{Stage: StagePush, Err: fmt.Errorf("pushing to %s: %w", dest, contextErr(ctx, err))}
	}
	out.Pushed = Pushed{Reference: dest, Digest: img.Digest, Duration: time.Since(start)}
	// What was pushed is known to the byte (the registry took the manifest
	// under its digest): it is not read back.
	out.Image = img
	if err := CheckPushedPlatform(out.Build.Platform, out.Image); err != nil {
		return &StageError{Stage: StageInspect, Err: err}
	}
	return nil
}

// labelAndPush commits the built image with req.Labels added as a new
// image of the store (an empty layer in its history, as writeLabelled
// adds), pushes it to dest and reads it back: the output's tag never names
// the image without its labels.
func (b *Builder) labelAndPush(ctx context.Context, req Request, dest string, pushAuth registry.AuthFile, out *Output, start time.Time) error {
	if len(req.Labels) > 0 {
		if err := b.labelInStore(ctx, req, out); err != nil {
			return &StageError{Stage: StagePush, Err: fmt.Errorf("labelling the image: %w", err)}
		}
	}
	var err error
	if out.Pushed, err = b.Push(ctx, out.Build.ImageID, dest, req.Format, pushAuth, req.Out); err != nil {
		return err
	}
	out.Pushed.Duration = time.Since(start)
	if out.Image, err = b.Inspect(ctx, digestReference(dest, out.Pushed.Digest), pushAuth); err != nil {
		return &StageError{Stage: StageInspect, Err: err}
	}
	if err := CheckPushedPlatform(out.Build.Platform, out.Image); err != nil {
		return &StageError{Stage: StageInspect, Err: err}
	}
	return nil
}

// labelInStore commits out's built image with req.Labels added as a new
// image of the store, which becomes out's.
func (b *Builder) labelInStore(ctx context.Context, req Request, out *Output) error {
	sys, err := b.systemContext(nil, registry.AuthFile{})
	if err != nil {
		return err
	}
	builder, err := buildah.NewBuilder(ctx, b.store, buildah.BuilderOptions{
		FromImage: out.Build.ImageID, PullPolicy: define.PullNever, SignaturePolicyPath: b.policyPath,
		SystemContext: sys, Isolation: define.IsolationChroot, CommonBuildOpts: &define.CommonBuildOptions{},
		NetworkInterface: hostNetwork{},
	})
	if err != nil {
		return err
	}
	defer func() { _ = builder.Delete() }()
	for k, v := range req.Labels {
		builder.SetLabel(k, v)
	}
	builder.SetCreatedBy(labelInstruction(req.Labels))
	id, _, _, err := builder.Commit(ctx, nil, buildah.CommitOptions{
		EmptyLayer: true, PreferredManifestType: manifestType(req.Format),
		SignaturePolicyPath: b.policyPath, SystemContext: sys,
	})
	if err != nil {
		return err
	}
	out.Build.ImageID = id
	return nil
}

// writeLabelled pushes src with labels added to its config to dest, and
// returns the image pushed. The layers are src's: a registry that has them
// in src's repository mounts them in dest's.
func (b *Builder) writeLabelled(ctx context.Context, src *cachedResult, dest string, pushAuth registry.AuthFile, labels map[string]string) (Image, error) {
	access := registry.Access{AuthFile: pushAuth, InsecureRegistries: b.cfg.InsecureRegistries, CertDir: b.cfg.CertDir, UserAgent: "archway-builder"}
	_, opts, err := regremote.Connect(ctx, access, registryRepository(dest))
	if err != nil {
		return Image{}, err
	}
	tag, err := name.NewTag(dest, regremote.NameOptions(access, dest)...)
	if err != nil {
		return Image{}, fmt.Errorf("output image reference %q: %w", dest, err)
	}
	img := src.image
	config := src.config
	if len(labels) > 0 {
		config = src.config.DeepCopy()
		if config.Config.Labels == nil {
			config.Config.Labels = map[string]string{}
		}
		maps.Copy(config.Config.Labels, labels)
		now := v1.Time{Time: time.Now().UTC().Truncate(time.Second)}
		config.Created = now
		config.History = append(config.History, v1.History{Created: now, CreatedBy: labelInstruction(labels), EmptyLayer: true})
		if img, err = mutate.ConfigFile(src.image, config); err != nil {
			return Image{}, err
		}
	}
	// src's layers are read with the cache's credentials when the
	// registry does not mount them: go-containerregistry reads a layer it
	// cannot mount from the image it has it from.
	if err := remote.Write(tag, img, opts...); err != nil {
		return Image{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return Image{}, err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return Image{}, err
	}
	dgst, err := img.Digest()
	if err != nil {
		return Image{}, err
	}
	return Image{
		Reference: registryRepository(dest) + "@" + dgst.String(),
		Digest:    dgst.String(),
		MediaType: string(mediaType),
		Size:      int64(len(raw)),
		Platform:  ociPlatform(config),
	}, nil
}

// labelInstruction is the history entry of the labels: the LABEL step that
// would have added them.
func labelInstruction(labels map[string]string) string {
	var sb strings.Builder
	sb.WriteString("LABEL")
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		sb.WriteString(" " + strconv.Quote(k) + "=" + strconv.Quote(labels[k]))
	}
	return sb.String()
}

// ociPlatform is the platform config records.
func ociPlatform(config *v1.ConfigFile) ocispec.Platform {
	return ocispec.Platform{OS: config.OS, Architecture: config.Architecture, Variant: config.Variant,
		OSVersion: config.OSVersion, OSFeatures: config.OSFeatures}
}
