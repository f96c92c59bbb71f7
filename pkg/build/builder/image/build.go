package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/openshift/imagebuilder"
	"go.podman.io/buildah/define"
	"go.podman.io/buildah/imagebuildah"
	lplatform "go.podman.io/common/libimage/platform"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/build/dockerfile"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// Format is the manifest format of built images.
type Format string

// The formats an image can be built in.
const (
	// FormatOCI builds OCI image manifests (buildah's default).
	FormatOCI Format = "oci"
	// FormatDocker builds Docker schema 2 manifests (OpenShift's builder's
	// format).
	FormatDocker Format = "docker"
)

// Request is one platform's build.
type Request struct {
	// ContextDir is the build context. Required.
	ContextDir string
	// Dockerfile is the Dockerfile's path, absolute or relative to
	// ContextDir. Default: Dockerfile, else Containerfile, in ContextDir.
	Dockerfile string
	// Platform is the target platform. Default: the machine's.
	Platform platform.Platform
	// From replaces the image of the Dockerfile's last FROM (a Docker
	// strategy's from). Default: the Dockerfile's.
	From string
	// Secrets are the secrets RUN --mount=type=secret reads, as buildah
	// takes them: id=ID[,src=FILE|,env=VAR]. A build whose Dockerfile
	// mounts a secret is never keyed.
	Secrets []string
	// Target is the stage to build and give as the image, as buildx's
	// --target names it; the stages it does not need are not built.
	// Default: the last stage.
	Target string
	// Args are the Dockerfile's ARG values. TARGETPLATFORM, TARGETOS,
	// TARGETARCH and TARGETVARIANT are set from Platform as buildx spells
	// it (Platform.Normalize: linux/arm64 and no variant for arm64).
	Args map[string]string
	// Labels are added to the image's config.
	Labels map[string]string
	// Env are KEY=VALUE environment variables set for the build's steps
	// and in the image.
	Env []string
	// RunMounts are "source:destination[:options]" bind mounts given to
	// every RUN step and left out of the image (a Docker strategy's
	// volumes).
	RunMounts []string
	// NoCache builds every step again.
	NoCache bool
	// ForcePull pulls base images even when the store has them.
	ForcePull bool
	// Layers keeps a cached image per step, for later builds with the same
	// work directory.
	Layers bool
	// Squash commits the layers the build adds as one layer on top of the
	// base image's layers (OpenShift's imageOptimizationPolicy SkipLayers).
	// Otherwise every instruction that changes the filesystem commits a
	// layer of its own, as docker build does (the policy None). A layer
	// cache keeps a layer per step: Squash with Cache is refused.
	Squash bool
	// Cache is a layer cache in a registry, read unless NoCache and written
	// by every step that runs; it implies Layers. With BuildAndPush to a
	// destination, it also keeps the whole result of a build whose inputs
	// can all be digested, without Labels, and a later build of the same
	// inputs pushes that result with its own Labels instead of building
	// (cachedresult.go); ReuseResults is then not used. Default: none.
	Cache *Cache
	// Format is the image's manifest format. Default: FormatOCI.
	Format Format
	// ReuseResults records the image each build gives under a digest of
	// its inputs, in the work directory, and reuses it, without building,
	// for a later build with the same inputs (unless NoCache); a push of a
	// reused image to the repository it was pushed to before only tags it.
	// Builds whose inputs cannot all be digested (RUN mounts of an image,
	// a secret or SSH, ADD from a URL, COPY --from an image, a FROM
	// --platform not told as buildah tells it; see pkg/build/dockerfile)
	// build as usual.
	ReuseResults bool
	// PullAuth holds the credentials for pulling base images.
	PullAuth registry.AuthFile
	// Out receives the build's step output. Default: discarded.
	Out io.Writer
	// PostCommit, when set, runs in a container of the built image before
	// BuildAndPush pushes it; a failure is a *StageError with
	// StagePostCommit and nothing is pushed. A build with a hook does not
	// reuse a result the layer cache keeps in its registry (the hook runs
	// in an image of the store). Default: none.
	PostCommit *PostCommit
	// Steps, when set, is called once the build is about to run the
	// Dockerfile's steps: not when its result is reused, nor when it
	// fails before (a base image missing the platform, say).
	Steps func()
}

// Result is a built image in the builder's store.
type Result struct {
	// ImageID is the image's ID in the store.
	ImageID string
	// Platform is the platform the image was built for.
	Platform platform.Platform
	// Duration is how long the build took.
	Duration time.Duration
	// Reused is true when the image is an earlier build's with the same
	// inputs (Request.ReuseResults) and nothing was built.
	Reused bool

	resultKey string // the key of the build's inputs; "" when they have none
	pushed    *Image // where a reused image was pushed before
	// unlabelled: the image lacks Request.Labels, which the push applies.
	unlabelled bool
	// cacheTag is where the layer cache keeps the unlabelled result of
	// these inputs (repository:tag), "" for none; cached is that result
	// when it was found there and nothing was built.
	cacheTag string
	cached   *cachedResult
}

// HostPlatform is the platform of the machine the builder runs on: what a
// build without a target platform builds for.
func HostPlatform() platform.Platform {
	return platform.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
}

// Build builds req's Dockerfile for one platform. A failure is a
// *StageError: StageDockerfile when the Dockerfile is missing or broken,
// StageBuild otherwise; a base image without the target platform fails
// with a *BaseImagePlatformError inside.
func (b *Builder) Build(ctx context.Context, req Request) (Result, error) {
	return b.build(ctx, req, resultStoreFor(req, ""))
}

// platformBuild is one platform's build as its steps fill it in.
type platformBuild struct {
	req   Request
	store resultStore // where results are kept; nil: nowhere
	start time.Time
	out   io.Writer
	// target is the platform built for; spelled is how buildah is told
	// it, and osName, arch and variant are what buildah makes of that.
	target, spelled       platform.Platform
	osName, arch, variant string

	dfPath string           // the Dockerfile buildah reads
	df     *dockerfile.File // and its model
	ignore ignoreFile
	// args are the build args; platformArgs the TARGET* and BUILD* ones
	// buildah sets itself; fromArgs what FROM lines expand with.
	args, platformArgs, fromArgs map[string]string
	images                       dockerfile.Images // the images the Dockerfile names
	lastStage                    int               // the target stage (-1: the last)

	cacheRepo reference.Named // the layer cache's repository; nil: none
	sys       *types.SystemContext

	keyed    keyedBuild
	key      string // the result key; "" when the result is not kept
	cacheTag string // where the layer cache keeps the result; "" for none
}

// build runs the steps of one platform's build. store is where results
// are kept for later builds of the same inputs (nil: nowhere): a build
// with a key and a kept result reuses it instead of running buildah.
func (b *Builder) build(ctx context.Context, req Request, store resultStore) (Result, error) {
	p := newPlatformBuild(req, store)
	if store != nil {
		go func() { _, _ = executableDigest() }() // read beside the base images
	}
	if req.Squash && req.Cache != nil {
		return Result{}, &StageError{Stage: StageBuild, Err: errSquashWithCache}
	}
	if err := b.readDockerfile(p); err != nil {
		return Result{}, err
	}
	p.expandArgs()
	if err := b.reachRegistries(p); err != nil {
		return Result{}, err
	}
	if err := b.resolveBases(ctx, p); err != nil {
		return Result{}, err
	}
	if res, reused, err := b.reuse(ctx, p); reused || err != nil {
		return res, err
	}
	if p.key != "" {
		cleanup, err := b.pinBases(p)
		if err != nil {
			return Result{}, err
		}
		defer cleanup()
	}
	opts, err := b.buildahOptions(p)
	if err != nil {
		return Result{}, err
	}
	id, err := b.runBuildah(ctx, p, opts)
	if err != nil {
		return Result{}, err
	}
	return b.built(p, id), nil
}

// runBuildah runs the Dockerfile's steps with buildah and returns the
// image's ID.
func (b *Builder) runBuildah(ctx context.Context, p *platformBuild, opts define.BuildOptions) (string, error) {
	if p.req.Steps != nil {
		p.req.Steps()
	}
	watch := newWatchWriter(p.out, reexecSealBusy)
	opts.Out, opts.Err, opts.ReportWriter = watch, watch, watch
	id, err := buildRetryingReexec(ctx, watch, func() (string, error) {
		id, _, err := imagebuildah.BuildDockerfiles(ctx, b.store, opts, p.dfPath)
		return id, err
	})
	if err != nil {
		return "", &StageError{Stage: StageBuild, Err: contextErr(ctx, err)}
	}
	return id, nil
}

func newPlatformBuild(req Request, store resultStore) *platformBuild {
	p := &platformBuild{req: req, store: store, start: time.Now(), target: req.Platform, out: req.Out}
	if p.target == (platform.Platform{}) {
		p.target = HostPlatform()
	}
	if p.out == nil {
		p.out = io.Discard
	}
	return p
}

// readDockerfile finds, prepares (prepareDockerfile) and parses the
// Dockerfile, and reads the context's ignore file.
func (b *Builder) readDockerfile(p *platformBuild) error {
	var err error
	if p.dfPath, p.df, err = b.prepareDockerfile(p.req); err != nil {
		return &StageError{Stage: StageDockerfile, Err: err}
	}
	if p.ignore, err = findIgnoreFile(p.req.ContextDir, dockerfilePath(p.req)); err != nil {
		return &StageError{Stage: StageDockerfile, Err: err}
	}
	return nil
}

// expandArgs works out the build args and, with them, the images the
// Dockerfile names.
func (p *platformBuild) expandArgs() {
	// buildah derives the TARGET* args from the platform it is given, so
	// it is given buildx's spelling, the canonical one: linux/arm64 (not
	// linux/arm64/v8), linux/arm/v7, linux/amd64 (not linux/amd64/v1).
	// Dockerfiles written for buildx name files by these values.
	p.spelled = p.target.Normalize()
	// The values buildah gives the TARGET* args, for expanding FROM lines.
	p.osName, p.arch, p.variant = lplatform.Normalize(p.spelled.OS, p.spelled.Architecture, p.spelled.Variant)
	p.args = maps.Clone(p.req.Args)
	if p.args == nil {
		p.args = map[string]string{}
	}
	p.platformArgs = platformBuildArgs(p.osName, p.arch, p.variant)
	p.fromArgs = maps.Clone(p.platformArgs)
	maps.Copy(p.fromArgs, p.args)
	// buildah drops a build arg named TARGETPLATFORM: its own always holds.
	p.fromArgs["TARGETPLATFORM"] = p.platformArgs["TARGETPLATFORM"]
	p.images = p.df.Images(p.fromArgs, imagebuilder.ProcessWord)
	p.lastStage = p.df.TargetStage(p.req.Target)
}

// reachRegistries sets up how the build reaches registries: the
// credentials (pull and layer cache) and the registry settings.
func (b *Builder) reachRegistries(p *platformBuild) error {
	// The registry settings cover every image the build pulls, also those
	// it does not key: a FROM with a --platform flag of its own, COPY
	// --from=image, RUN --mount=from=image.
	refs := p.images.Refs()
	var err error
	if p.req.Cache != nil {
		if p.cacheRepo, err = p.req.Cache.reference(); err != nil {
			return &StageError{Stage: StageBuild, Err: err}
		}
		refs = append(refs, p.cacheRepo.Name())
	}
	auth, err := b.buildAuth(p.req.PullAuth, p.req.Cache, p.cacheRepo)
	if err != nil {
		return &StageError{Stage: StageBuild, Err: err}
	}
	if p.sys, err = b.systemContext(refs, auth); err != nil {
		return &StageError{Stage: StageBuild, Err: err}
	}
	return nil
}

// resolveBases checks that the base images the build pulls exist for
// their platforms (and are not blocked), reading their digests when the
// result is kept; what it finds is what the build is keyed by.
func (b *Builder) resolveBases(ctx context.Context, p *platformBuild) error {
	// The stages after the target are not built: their bases are neither
	// checked nor keyed.
	bases := dockerfile.UpTo(dockerfile.Unique(p.images.Bases()), p.lastStage)
	// A FROM with a --platform flag of its own pulls for that platform
	// ($BUILDPLATFORM for a cross-compiling stage): it is checked and keyed
	// by its digest for that platform.
	platformed := dockerfile.UpTo(dockerfile.Unique(p.images.PlatformBases()), p.lastStage)
	choice := *p.sys
	choice.OSChoice, choice.ArchitectureChoice, choice.VariantChoice = p.osName, p.arch, p.variant
	// The bases the target stage (the last, or --target) pulls itself.
	targetStage := p.lastStage
	if targetStage < 0 {
		targetStage = len(p.df.Stages) - 1
	}
	targetBases := map[string]bool{}
	for _, base := range p.images.Bases() {
		if base.Stage == targetStage {
			targetBases[base.Ref] = true
		}
	}
	resolved := make([]resolvedBase, 0, len(bases)+len(platformed))
	for _, base := range slices.Concat(bases, platformed) {
		want, sysFor := p.target, &choice
		if base.Platform != "" {
			var err error
			if want, err = platform.Parse(base.Platform); err != nil {
				return &StageError{Stage: StageDockerfile, Err: err}
			}
			own := *p.sys
			own.OSChoice, own.ArchitectureChoice, own.VariantChoice = lplatform.Normalize(want.OS, want.Architecture, want.Variant)
			sysFor = &own
		}
		rb, err := resolvedBase{}, registry.CheckBlocked(sysFor, base.Ref, false)
		if err == nil {
			rb, err = checkBaseImage(ctx, sysFor, base.Ref, want, p.store != nil)
		}
		if err != nil && (base.Platform != "" || !targetBases[base.Ref]) {
			// Only the target stage's base is sure to be pulled: buildah
			// skips the stages the target does not need, and says so
			// itself for one it builds. The build is not keyed by it.
			_, _ = fmt.Fprintf(p.out, "note: %v; going on, since the target stage does not pull it\n", err)
			rb, err = resolvedBase{Ref: base.Ref}, nil
		}
		if err != nil {
			_, _ = fmt.Fprintf(p.out, "error: %v\n", err)
			return &StageError{Stage: StageBuild, Err: err}
		}
		rb.Platform = base.Platform
		resolved = append(resolved, rb)
	}
	// A build arg for a BUILD* platform arg makes what buildah gives
	// those args a guess.
	setsBuildArgs := slices.ContainsFunc(slices.Collect(maps.Keys(p.req.Args)), func(name string) bool {
		return strings.HasPrefix(name, "BUILD") && dockerfile.IsPlatformArg(name)
	})
	p.keyed = keyedBuild{file: p.df, target: p.target, bases: resolved, platformArgs: p.platformArgs, ignore: p.ignore,
		unkeyedImages: p.images.Unkeyed() || setsBuildArgs}
	return nil
}

// reuse keys the build in its store and returns the result the store
// keeps for the key, when there is one usable and the build may reuse it
// (not NoCache).
func (b *Builder) reuse(ctx context.Context, p *platformBuild) (Result, bool, error) {
	if p.store == nil {
		return Result{}, false, nil
	}
	key, err := p.store.key(p.req, p.keyed)
	if err != nil {
		return Result{}, false, &StageError{Stage: StageBuild, Err: err}
	}
	if key == "" {
		return Result{}, false, nil
	}
	p.key, p.cacheTag = key, p.store.tag(p, key)
	if p.req.NoCache {
		return Result{}, false, nil
	}
	return p.store.find(ctx, b, p)
}

// pinBases writes the Dockerfile buildah reads with each base pinned to
// the digest the key has: a tag moved meanwhile cannot put another base
// under the key. cleanup removes it.
func (b *Builder) pinBases(p *platformBuild) (cleanup func(), err error) {
	digests := make(map[string]string, len(p.keyed.bases))
	for _, rb := range p.keyed.bases {
		digests[pinKey(rb.Ref, rb.Platform)] = rb.Digest
	}
	pinned, err := pinBases(p.df, p.images, digests)
	if err != nil {
		return nil, &StageError{Stage: StageDockerfile, Err: err}
	}
	if p.dfPath, err = b.writeDockerfile(pinned); err != nil {
		return nil, &StageError{Stage: StageBuild, Err: err}
	}
	dir := filepath.Dir(p.dfPath)
	return func() { _ = os.RemoveAll(dir) }, nil
}

// buildahOptions are the options buildah builds p with.
func (b *Builder) buildahOptions(p *platformBuild) (define.BuildOptions, error) {
	req := p.req
	ulimits, err := hardLimitUlimits()
	if err != nil {
		return define.BuildOptions{}, &StageError{Stage: StageBuild, Err: err}
	}
	opts := define.BuildOptions{
		ContextDirectory: req.ContextDir,
		PullPolicy:       define.PullIfMissing,
		Isolation:        define.IsolationChroot,
		Runtime:          b.cfg.OCIRuntime,
		Args:             p.args,
		Labels:           formatLabels(req.Labels),
		Envs:             req.Env,
		TransientMounts:  req.RunMounts,
		// buildah excludes what the ignore file read here says, so that
		// it is what the result key has; with no patterns it reads an
		// empty file rather than look for one itself.
		Excludes:   p.ignore.Excludes,
		IgnoreFile: p.ignore.Path,
		// buildah commits a layer per step only when it keeps an image
		// per step (Layers); without Layers it commits the stage's result
		// once, on top of the base (Squash). A build that keeps no images
		// for later builds (!req.Layers) looks none up either (NoCache).
		NoCache: req.NoCache || !req.Layers,
		Layers:  !req.Squash,
		// Only the final image is kept: intermediate containers go at once.
		RemoveIntermediateCtrs:  true,
		ForceRmIntermediateCtrs: true,
		Out:                     p.out,
		Err:                     p.out,
		ReportWriter:            p.out,
		SignaturePolicyPath:     b.policyPath,
		SystemContext:           p.sys,
		NamespaceOptions: []define.NamespaceOption{
			{Name: string(specs.NetworkNamespace), Host: true},
		},
		NetworkInterface: hostNetwork{},
		CommonBuildOpts:  &define.CommonBuildOptions{Ulimit: ulimits, Secrets: req.Secrets},
		OutputFormat:     manifestType(req.Format),
		Target:           req.Target,
		Platforms: []struct{ OS, Arch, Variant string }{
			{OS: p.spelled.OS, Arch: p.spelled.Architecture, Variant: p.spelled.Variant},
		},
		MaxPullPushRetries: 2,
		PullPushRetryDelay: 2 * time.Second,
	}
	if len(opts.Excludes) == 0 {
		opts.IgnoreFile = os.DevNull
	}
	if req.ForcePull {
		opts.PullPolicy = define.PullAlways
	}
	if b.cfg.Isolation == IsolationOCI {
		opts.Isolation = define.IsolationOCI
	}
	// With a cache tag the labels are applied at the push, so that the
	// result is the same for every build of these inputs.
	if p.cacheTag != "" {
		opts.Labels = nil
	}
	if (req.Layers && !req.NoCache) || p.cacheRepo != nil {
		if argsDigest := cacheArgsDigest(p.df, p.fromArgs); argsDigest != "" {
			opts.UnsetLabels = []string{cacheArgsLabelPrefix + argsDigest}
		}
	}
	if p.cacheRepo != nil {
		opts.CacheTo = []reference.Named{p.cacheRepo}
		if !req.NoCache {
			opts.NoCache = false
			opts.CacheFrom = []reference.Named{p.cacheRepo}
		}
	}
	return opts, nil
}

// built is the Result of the image buildah built as id, kept in the store
// under the build's key. The context was digested before the build read
// it: a file changed meanwhile may be in the image, so the result is kept
// only when the context is still what was digested.
func (b *Builder) built(p *platformBuild, id string) Result {
	res := Result{ImageID: id, Platform: p.target, unlabelled: p.cacheTag != ""}
	if p.key != "" {
		if after, err := p.store.key(p.req, p.keyed); err != nil || after != p.key {
			_, _ = fmt.Fprintf(p.out, "The build context changed during the build: its image is not kept for reuse\n")
		} else {
			p.store.keep(b, p.key, id)
			res.resultKey, res.cacheTag = p.key, p.cacheTag
		}
	}
	res.Duration = time.Since(p.start)
	return res
}

// errSquashWithCache refuses a squashed build with a layer cache.
var errSquashWithCache = errors.New("a squashed build (imageOptimizationPolicy SkipLayers) commits one layer, and a layer cache keeps a layer per step: " +
	"build with one or the other")

// shortImageID is an image ID as buildah prints it.
func shortImageID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// buildRetryingReexec runs build, and runs it again, up to maxBuildAttempts
// times in all, while it fails having printed reexecSealBusy.
func buildRetryingReexec(ctx context.Context, watch *watchWriter, build func() (string, error)) (string, error) {
	for attempt := 1; ; attempt++ {
		watch.Reset()
		id, err := build()
		if err == nil || !watch.Seen() || attempt == maxBuildAttempts || ctx.Err() != nil {
			return id, err
		}
		_, _ = fmt.Fprintf(watch.w, "builder: a RUN step could not start: the kernel refused to seal the re-executed builder's memfd copy (EBUSY), "+
			"a passing condition of this machine; building again (attempt %d of %d)\n", attempt+1, maxBuildAttempts)
	}
}

// prepareDockerfile finds and parses req's Dockerfile and, with req.From,
// writes a copy with the last FROM replaced into the work directory. It
// returns the path to build and the Dockerfile buildah reads there.
func (b *Builder) prepareDockerfile(req Request) (string, *dockerfile.File, error) {
	if req.ContextDir == "" {
		return "", nil, fmt.Errorf("no build context directory")
	}
	if info, err := os.Stat(req.ContextDir); err != nil {
		return "", nil, fmt.Errorf("build context: %w", err)
	} else if !info.IsDir() {
		return "", nil, fmt.Errorf("build context %s is not a directory", req.ContextDir)
	}
	path := dockerfilePath(req)
	content, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("reading the Dockerfile: %w", err)
	}
	if len(strings.TrimSpace(string(content))) == 0 {
		return "", nil, fmt.Errorf("the Dockerfile %s is empty", path)
	}
	df, err := dockerfile.Parse(content)
	if err != nil {
		return "", nil, err
	}
	if req.From == "" {
		return path, df, nil
	}
	if df, err = df.ReplaceLastFrom(req.From); err != nil {
		return "", nil, err
	}
	if path, err = b.writeDockerfile(df.Content()); err != nil {
		return "", nil, err
	}
	return path, df, nil
}

// writeDockerfile writes content as a Dockerfile in a new directory of the
// work directory and returns its path.
func (b *Builder) writeDockerfile(content []byte) (string, error) {
	dir, err := os.MkdirTemp(b.tmpDir, "dockerfile-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "Dockerfile")
	if err := os.WriteFile(path, content, 0o600); err != nil { //nolint:gosec // G703: a fixed name in a directory just made in the work directory
		return "", err
	}
	return path, nil
}

// dockerfilePath is the path of req's Dockerfile.
func dockerfilePath(req Request) string {
	path := req.Dockerfile
	switch {
	case path == "":
		path = filepath.Join(req.ContextDir, "Dockerfile")
		if _, err := os.Stat(path); err != nil {
			if alt := filepath.Join(req.ContextDir, "Containerfile"); fileExists(alt) {
				path = alt
			}
		}
	case !filepath.IsAbs(path):
		path = filepath.Join(req.ContextDir, path)
	}
	return path
}

// platformBuildArgs are the platform args buildah sets for a build for
// the target os/arch/variant (as buildah spells them) on this machine.
func platformBuildArgs(osName, arch, variant string) map[string]string {
	return map[string]string{
		"TARGETOS": osName, "TARGETARCH": arch, "TARGETVARIANT": variant,
		"TARGETPLATFORM": lplatform.ToString(osName, arch, variant),
		"BUILDOS":        runtime.GOOS, "BUILDARCH": runtime.GOARCH,
		"BUILDPLATFORM": runtime.GOOS + "/" + runtime.GOARCH,
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// formatLabels returns labels as buildah takes them, "name=value", sorted
// so that the same labels give the same image.
func formatLabels(labels map[string]string) []string {
	out := make([]string, 0, len(labels))
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, name+"="+labels[name])
	}
	return out
}

// manifestType returns buildah's name for a manifest format.
func manifestType(f Format) string {
	if f == FormatDocker {
		return define.Dockerv2ImageManifest
	}
	return define.OCIv1ImageManifest
}
