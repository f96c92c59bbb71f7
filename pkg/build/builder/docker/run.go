// Package docker is what a build pod does (`builder docker-build`):
// it fetches the Build's source, builds its Dockerfile for the pod's one
// platform (or this machine's, for a classic build) with the buildah
// library, pushes the image, and records the outcome in the Build's status
// through a report.Reporter: Running when the Dockerfile's steps begin (or
// after Options.RunningAfter without a step), then Complete with the pushed
// image or Failed with a reason and message; a platform that ends sooner is
// written once, with its outcome. A build stopped by a
// signal records nothing: the controller says what became of the platform.
//
// The flow reaches the image builder and the source through small seams
// (NewBuilder, Fetch) so that its decisions are tested without buildah or
// git; the command in cmd/builder only reads flags and the environment.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.podman.io/image/v5/pkg/sysregistriesv2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/build/trigger/binary/artifact"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// logTailBytes is how much of the end of the build's output a failure
// records as its log snippet.
const logTailBytes = 4000

// Options are where a build pod keeps its files and finds its inputs.
type Options struct {
	// WorkDir holds the source, caches and temporary files; "" makes a
	// temporary directory, removed at the end.
	WorkDir string
	// StorageDir is the container store's root ("" puts it in WorkDir);
	// StorageDriver is overlay or vfs ("" picks).
	StorageDir, StorageDriver string
	// Disposable says the work directory and the store are thrown away
	// after the build (image.Config.Disposable), as a build pod's
	// emptyDir volumes are.
	Disposable bool
	// InsecureRegistries are reached without TLS checks (loopback ones
	// always are).
	InsecureRegistries []string
	// CertDir holds registry CA certificates, <CertDir>/<host[:port]>/*.crt
	// (image.Config.CertDir); "": containers/image's defaults.
	CertDir string
	// Registries are the cluster's registry configuration
	// (image.Config.Registries): mirrors, blocked and insecure registries.
	Registries []sysregistriesv2.Registry
	// AllowedRegistries are the only registry scopes images may come from
	// (image.Config.AllowedRegistries). Empty: every registry.
	AllowedRegistries []string
	// Format is the manifest format of the image.
	Format image.Format
	// SourceSecretDir is where the source secret is mounted; used when
	// the Build names one and the directory exists.
	SourceSecretDir string
	// BuildSecretsDir and BuildConfigMapsDir hold the mounts of
	// spec.source.secrets and spec.source.configMaps.
	BuildSecretsDir, BuildConfigMapsDir string
	// TrustedCADir holds the cluster's trusted CA bundle
	// (TrustedCABundleFile) when the Build sets mountTrustedCA ("":
	// TrustedCAMountDir).
	TrustedCADir string
	// BinaryArchive is a Binary source's archive ("": Stdin).
	BinaryArchive string
	// PushAuthDir and PullAuthDir are the mounted docker configs of the
	// push and pull secrets ("" for none).
	PushAuthDir, PullAuthDir string
	// AccountAuthDir holds the service account's image pull secrets, one
	// directory each, used without a push or pull secret ("" for none).
	AccountAuthDir string
	// TerminationLog receives the failure reason, if the file exists (the
	// pod's termination message).
	TerminationLog string
	// AllowFileGitURIs lets a Git source name a local repository
	// (source.Options.AllowFileGitURIs).
	AllowFileGitURIs bool
	// RequireUserNamespace refuses to build, before any source is
	// fetched, unless the builder runs in a user namespace of its own
	// (CheckUserNamespace): a build pod of build.podSecurity Unprivileged
	// relies on it for its capabilities to stay off the node.
	RequireUserNamespace bool
	// RunningAfter is how long the pod works before it reports Running
	// when no step has begun by then (default DefaultRunningAfter).
	RunningAfter time.Duration
}

// DefaultRunningAfter is Options.RunningAfter's default. A build pod
// reports Running when its Dockerfile's steps begin, or once it has worked
// this long (a slow fetch), whichever comes first: a platform whose result
// is reused from the layer cache, or that fails before its steps, within
// that time is written once, with its outcome, rather than twice.
const DefaultRunningAfter = time.Second

// Revisions reads and records the Build's spec.revision, as it is on the
// apiserver: report.BuildRevisions is one.
type Revisions interface {
	// Revision returns the Build's spec.revision now (nil for none).
	Revision(ctx context.Context) (*buildv1.SourceRevision, error)
	// Record sets spec.revision to rev unless the Build has one, and
	// returns what the Build has afterwards.
	Record(ctx context.Context, rev *buildv1.SourceRevision) (*buildv1.SourceRevision, error)
}

// ImageBuilder builds and pushes one image; *image.Builder is one.
type ImageBuilder interface {
	BuildAndPush(ctx context.Context, req image.Request, dest string, pushAuth registry.AuthFile) (image.Output, error)
	// PlatformConfig reads a Source build's builder image for a platform.
	PlatformConfig(ctx context.Context, role, ref string, target platform.Platform, auth registry.AuthFile) (image.PlatformImage, error)
	TempDir() string
	Close() error
}

// Run is one run of a build pod.
type Run struct {
	// Build is the Build the pod builds (from $BUILD).
	Build *buildv1.Build
	// Target is the platform to build; zero for a classic build (this
	// machine's platform).
	Target platform.Platform
	// Reporter records the outcome.
	Reporter report.Reporter
	// Revisions pins the Git commit every platform builds (see
	// pinnedRevision); nil builds what the Build in $BUILD names, or else
	// what its ref resolves to (a build outside a cluster).
	Revisions Revisions
	Options   Options
	// Stdin is a Binary source's archive when Options.BinaryArchive is "".
	Stdin io.Reader
	// Out receives the build's log.
	Out io.Writer
	// NewBuilder makes the image builder (default: image.New).
	NewBuilder func(image.Config) (ImageBuilder, error)
	// LookupEnv reads the build container's environment (default:
	// os.LookupEnv): the values of env and buildArgs with a valueFrom.
	LookupEnv func(string) (string, bool)
	// Fetch fetches the source (default: source.Fetch).
	Fetch func(ctx context.Context, opts source.Options, dir string) (source.Fetched, error)
	// Untag removes a tag from its registry (default: manifestlist.Untag).
	Untag func(ctx context.Context, access registry.Access, refs ...string) error

	log     io.Writer
	tail    *tailBuffer
	stages  []buildv1.StageInfo
	running *runningReport
	// commit is the Git commit checked out, once it is.
	commit string
}

// Do builds: it records Running, fetches, builds and pushes, then records
// Complete, or Failed with the reason. It returns an error when the image
// was not built (and pushed), so the pod's exit code is 1.
func (d *Run) Do(ctx context.Context) error {
	d.tail = &tailBuffer{max: logTailBytes}
	d.log = io.MultiWriter(d.Out, d.tail)
	after := d.Options.RunningAfter
	if after <= 0 {
		after = DefaultRunningAfter
	}
	d.running = startRunningReport(ctx, d.Reporter.Running, after)
	res, buildErr := d.run(ctx)
	d.removeBinaryInput(ctx)
	// The outcome is applied after a Running report that began, never
	// before it.
	if err := d.running.end(); err != nil {
		printf(d.log, "Warning: %v\n", err)
	}
	if buildErr != nil {
		return d.fail(ctx, buildErr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := d.Reporter.Complete(rctx, res); err != nil {
		// The controller reads the outcome from the status: an image it
		// cannot see is a failed platform.
		return d.fail(ctx, fmt.Errorf("the image was pushed, but recording it failed: %w", err))
	}
	return nil
}

func (d *Run) newBuilder(cfg image.Config) (ImageBuilder, error) {
	if d.NewBuilder != nil {
		return d.NewBuilder(cfg)
	}
	return image.New(cfg)
}

func (d *Run) fetch(ctx context.Context, opts source.Options, dir string) (source.Fetched, error) {
	if d.Fetch != nil {
		return d.Fetch(ctx, opts, dir)
	}
	return source.Fetch(ctx, opts, dir)
}

// TargetPlatform returns the platform a build pod builds: the Build's one
// platform, or the zero Platform (this machine's) for a classic build.
func TargetPlatform(b *buildv1.Build) (platform.Platform, error) {
	switch len(b.Spec.Platforms) {
	case 0:
		return platform.Platform{}, nil
	case 1:
		p, err := platform.Parse(b.Spec.Platforms[0])
		if err != nil {
			return platform.Platform{}, fmt.Errorf("the Build's target platform: %w", err)
		}
		return p, nil
	}
	return platform.Platform{}, fmt.Errorf("the Build has %d platforms: a build pod builds one (the controller gives each pod its own)",
		len(b.Spec.Platforms))
}

// runInputs are what a run reads from its Build and the pod before any
// work: the strategy's options, where the image goes, its build
// arguments, environment, RUN mounts and credentials.
type runInputs struct {
	strategy *buildv1.DockerBuildStrategy
	// isSource is set for a Source build, which prepareSource makes a
	// Dockerfile build.
	isSource bool
	// dest is where the image is pushed; "" for nowhere.
	dest     string
	args     map[string]string
	env      []string
	mounts   []string
	pushAuth registry.AuthFile
	pullAuth registry.AuthFile
}

// run is a build's steps: check the sandbox; read the Build's inputs and
// the credentials; fetch the source while the image builder opens; make
// a Source build a Dockerfile build; build, push and say what was pushed.
func (d *Run) run(ctx context.Context) (report.Result, error) {
	if err := d.checkSandbox(); err != nil {
		return report.Result{}, err
	}
	in, err := d.readInputs()
	if err != nil {
		return report.Result{}, err
	}
	workDir := d.Options.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "archway-docker-build-"); err != nil {
			return report.Result{}, err
		}
		defer func() { _ = os.RemoveAll(workDir) }()
	}
	if err := d.readCredentials(&in, workDir); err != nil {
		return report.Result{}, err
	}
	builder, err := d.openBuilder(workDir)
	if err != nil {
		return report.Result{}, err
	}
	// Whatever happens to the fetch, the builder is waited for and closed.
	defer func() {
		if b, err := builder(); err == nil {
			if err := b.Close(); err != nil {
				printf(d.log, "Warning: %v\n", err)
			}
		}
	}()
	fetched, err := d.fetchSource(ctx, in, workDir)
	if err != nil {
		return report.Result{}, err
	}
	b, err := builder()
	if err != nil {
		return report.Result{}, err
	}
	if err := os.Setenv("TMPDIR", b.TempDir()); err != nil {
		return report.Result{}, err
	}
	target := d.Target
	if target == (platform.Platform{}) {
		target = image.HostPlatform()
	}
	var secrets []string
	if in.isSource {
		sb, err := d.prepareSource(ctx, b, fetched, target, in.env, in.pullAuth, in.pushAuth, workDir)
		if err != nil {
			return report.Result{}, err
		}
		fetched, in.pullAuth, secrets = sb.fetched, sb.pullAuth, sb.secrets
		in.env = nil // in the Dockerfile, after the source's .s2i/environment
	}
	req, err := d.request(in, fetched, target, secrets)
	if err != nil {
		return report.Result{}, err
	}
	return d.buildAndPush(ctx, b, req, in)
}

// checkSandbox refuses to build in the node's user namespace when the pod
// was made to run in one of its own (--require-user-namespace): a runtime
// that ignores hostUsers: false.
func (d *Run) checkSandbox() error {
	if !d.Options.RequireUserNamespace {
		return nil
	}
	if err := CheckUserNamespace(uidMapPath); err != nil {
		return &statusError{reason: buildv1.StatusReasonUserNamespaceIgnored, err: err}
	}
	return nil
}

// readInputs reads the Build's strategy, output, build arguments,
// environment and RUN mounts (the trusted CA bundle's among them when the
// Build mounts it).
func (d *Run) readInputs() (runInputs, error) {
	spec := d.Build.Spec
	strategy, err := buildOptions(spec.Strategy)
	if err != nil {
		return runInputs{}, err
	}
	in := runInputs{strategy: strategy, isSource: spec.Strategy.Type == buildv1.SourceBuildStrategyType}
	if in.dest, err = outputReference(spec.Output); err != nil {
		return runInputs{}, err
	}
	lookup := d.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if in.args, err = buildArgs(strategy.BuildArgs, lookup); err != nil {
		return runInputs{}, err
	}
	if in.env, err = buildEnv(strategy.Env, lookup); err != nil {
		return runInputs{}, err
	}
	in.mounts = runMounts(strategy.Volumes, buildVolumeMountDir)
	if ptr.Deref(spec.MountTrustedCA, false) {
		dir := d.Options.TrustedCADir
		if dir == "" {
			dir = TrustedCAMountDir
		}
		ca, err := trustedCAMounts(dir)
		if err != nil {
			return runInputs{}, &statusError{reason: buildv1.StatusReasonDockerBuildFailed, err: err}
		}
		// A build volume mounted at a trust path wins.
		in.mounts = append(withoutDestinations(ca, in.mounts), in.mounts...)
	}
	return in, nil
}

// readCredentials finds the push credentials and those of every pull: the
// pull secret's or, without one, the service account's pull secrets
// (merged into workDir).
func (d *Run) readCredentials(in *runInputs, workDir string) error {
	var err error
	if in.pushAuth, err = d.pushAuth(in.dest); err != nil {
		return &statusError{reason: buildv1.StatusReasonPushImageToRegistryFailed, err: err}
	}
	in.pullAuth, err = registry.FindAuthFile(d.Options.PullAuthDir)
	if err == nil && d.Options.PullAuthDir == "" {
		in.pullAuth, err = registry.MergeAccountAuth(d.Options.AccountAuthDir, workDir)
	}
	if err != nil {
		return &statusError{reason: buildv1.StatusReasonDockerBuildFailed, err: err}
	}
	return nil
}

// openBuilder starts opening the image builder (its container store) and
// returns how to wait for it: the source is fetched meanwhile, as neither
// needs the other. Until it is open, temporary files go to the work
// directory (a pod's root file system is read-only).
func (d *Run) openBuilder(workDir string) (func() (ImageBuilder, error), error) {
	fetchTmp := filepath.Join(workDir, "tmp")
	if err := os.MkdirAll(fetchTmp, 0o700); err != nil {
		return nil, err
	}
	if err := os.Setenv("TMPDIR", fetchTmp); err != nil {
		return nil, err
	}
	type opened struct {
		b   ImageBuilder
		err error
	}
	opening := make(chan opened, 1)
	go func() {
		b, err := d.newBuilder(image.Config{
			WorkDir:            filepath.Join(workDir, "buildah"),
			StorageDir:         d.Options.StorageDir,
			StorageDriver:      d.Options.StorageDriver,
			InsecureRegistries: d.Options.InsecureRegistries,
			CertDir:            d.Options.CertDir,
			Registries:         d.Options.Registries,
			AllowedRegistries:  d.Options.AllowedRegistries,
			Disposable:         d.Options.Disposable,
		})
		opening <- opened{b, err}
	}()
	return sync.OnceValues(func() (ImageBuilder, error) {
		o := <-opening
		return o.b, o.err
	}), nil
}

// fetchSource fetches the source into workDir/source and records the
// stage: the commit the Build pins, the uploaded binary (the stored
// artifact every platform's pod reads, or the pod's own input) or the
// inline Dockerfile.
func (d *Run) fetchSource(ctx context.Context, in runInputs, workDir string) (source.Fetched, error) {
	spec := d.Build.Spec
	start := time.Now()
	opts := source.Options{
		Source:         spec.Source,
		Revision:       spec.Revision,
		DockerfilePath: in.strategy.DockerfilePath,
		NoDockerfile:   in.isSource,
		SecretsDir:     d.Options.BuildSecretsDir,
		ConfigMapsDir:  d.Options.BuildConfigMapsDir,
		Out:            d.log,

		AllowFileGitURIs: d.Options.AllowFileGitURIs,
	}
	if dir := d.Options.SourceSecretDir; dir != "" && spec.Source.SourceSecret != nil {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			opts.SecretDir = dir
		}
	}
	if in.isSource {
		// A Source build's secrets are mounted for assemble alone, and its
		// ConfigMaps copied into the working directory (prepareSource),
		// never into the source.
		opts.Source.Secrets, opts.Source.ConfigMaps = nil, nil
	}
	if source.Type(spec.Source) == buildv1.BuildSourceBinary {
		opts.Binary = d.Stdin
		switch {
		case spec.Source.Binary != nil && spec.Source.Binary.Artifact != "":
			// Every platform's pod reads the same stored upload, checked
			// against its digest before anything is extracted.
			rc, err := d.downloadBinary(ctx, spec, in.dest, in.pushAuth, workDir)
			if err != nil {
				return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: err}
			}
			defer func() { _ = rc.Close() }()
			opts.Binary = rc
		case d.Options.BinaryArchive != "":
			f, err := os.Open(d.Options.BinaryArchive)
			if err != nil {
				return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: err}
			}
			defer func() { _ = f.Close() }()
			opts.Binary = f
		}
	}
	fetched, err := d.fetchPinned(ctx, opts, filepath.Join(workDir, "source"))
	d.stage(buildv1.StageFetchInputs, buildv1.StepFetchGitSource, start)
	return fetched, err
}

// request is the image build of the fetched source for target, with the
// layer cache next to the output when the Build has one.
func (d *Run) request(in runInputs, fetched source.Fetched, target platform.Platform, secrets []string) (image.Request, error) {
	strategy := in.strategy
	req := image.Request{
		ContextDir: fetched.ContextDir,
		Dockerfile: fetched.Dockerfile,
		Platform:   target,
		Args:       in.args,
		Labels:     imageLabels(d.Build, fetched.Revision),
		Env:        in.env,
		RunMounts:  in.mounts,
		Secrets:    secrets,
		NoCache:    strategy.NoCache,
		ForcePull:  strategy.ForcePull,
		Squash:     strategy.ImageOptimizationPolicy.SkipsLayers(),
		Format:     d.Options.Format,
		PullAuth:   in.pullAuth,
		PostCommit: postCommit(d.Build.Spec.PostCommit),
		Out:        d.log,
		Steps:      d.running.begin,
	}
	if strategy.From != nil {
		req.From = strategy.From.Name
	}
	if p := strategy.ImageOptimizationPolicy; p != nil && *p == buildv1.ImageOptimizationSkipLayersAndWarn {
		printf(d.log, "Warning: imageOptimizationPolicy %s: the layers this build adds are squashed into one layer on top of the base image's layers\n", *p)
	}
	cacheRepo, err := layerCacheRepository(strategy.LayerCache, in.dest, req.Platform)
	if err != nil {
		return image.Request{}, &statusError{reason: buildv1.StatusReasonDockerBuildFailed, err: err}
	}
	switch {
	case cacheRepo != "":
		// The push secret writes the output, and so the cache next to it.
		req.Cache = &image.Cache{Repository: cacheRepo, Auth: in.pushAuth}
		printf(d.log, "Layer cache: %s\n", cacheRepo)
	case strategy.LayerCache != nil:
		printf(d.log, "No layer cache: the Build has no output and its layerCache names no repository\n")
	}
	return req, nil
}

// buildAndPush builds req and pushes the image to in.dest (nothing when
// the Build has no output), records each stage's time and returns what to
// report.
func (d *Run) buildAndPush(ctx context.Context, b ImageBuilder, req image.Request, in runInputs) (report.Result, error) {
	printf(d.log, "Building %s/%s for %s\n", d.Build.Namespace, d.Build.Name, req.Platform)
	out, err := b.BuildAndPush(ctx, req, in.dest, in.pushAuth)
	if out.Build.Duration > 0 || err != nil {
		d.stageDuration(buildv1.StageBuild, buildv1.StepDockerBuild, out.Build.Duration)
	}
	if out.PostCommit > 0 {
		d.stageDuration(buildv1.StagePostCommit, buildv1.StepExecPostCommitHook, out.PostCommit)
	}
	if out.Pushed.Duration > 0 {
		d.stageDuration(buildv1.StagePushImage, buildv1.StepPushDockerImage, out.Pushed.Duration)
	}
	if err != nil {
		return report.Result{}, err
	}
	res := report.Result{Stages: d.stages, Commit: d.commit}
	if in.dest == "" {
		printf(d.log, "Built %s; the Build has no output, so nothing was pushed\n", shortID(out.Build.ImageID))
		return res, nil
	}
	res.OutputReference = in.dest
	res.Image = &out.Image
	printf(d.log, "Pushed %s (%s/%s", out.Image.Reference, out.Image.Platform.OS, out.Image.Platform.Architecture)
	if out.Image.Platform.Variant != "" {
		printf(d.log, "/%s", out.Image.Platform.Variant)
	}
	printf(d.log, ")\n")
	return res, nil
}

// downloadBinary fetches the Build's binary input from its artifact in
// the output repository, with the push secret.
func (d *Run) downloadBinary(ctx context.Context, spec buildv1.BuildSpec, dest string, pushAuth registry.AuthFile, workDir string) (io.ReadCloser, error) {
	if dest == "" {
		return nil, errors.New("the binary input is stored in the output repository, and the Build has no output")
	}
	repository, err := artifact.Repository(dest)
	if err != nil {
		return nil, err
	}
	access := registry.Access{AuthFile: pushAuth, InsecureRegistries: d.Options.InsecureRegistries, CertDir: d.Options.CertDir, UserAgent: "archway-builder"}
	printf(d.log, "Fetching the binary input %s\n", spec.Source.Binary.Artifact)
	return artifact.Download(ctx, access, spec.Source.Binary.Artifact, repository, workDir, source.DefaultArchiveLimits.MaxBytes)
}

// untagTimeout bounds the removal of the binary input's tag, which runs
// even when the build was stopped by a signal (within the pod's grace
// period).
const untagTimeout = 20 * time.Second

// removeBinaryInput removes the tag of the Build's binary input when this
// pod is its only reader (a Build of one platform, or a classic build: no
// manifest-list pod, which removes it otherwise), whatever the build's
// outcome: the tag kept the stored upload from registry garbage collection
// until it was read, and no other pod will read it. Only the tag the
// artifact's digest names in the output's repository is removed; a failure
// is a warning in the log.
func (d *Run) removeBinaryInput(ctx context.Context) {
	b := d.Build
	if b.Annotations[buildv1.BinaryInputReaderAnnotation] != buildv1.BinaryInputOnlyReader ||
		b.Spec.Source.Binary == nil || b.Spec.Source.Binary.Artifact == "" {
		return
	}
	dest, err := outputReference(b.Spec.Output)
	if err != nil || dest == "" {
		return
	}
	tag := artifact.TagFor(b.Spec.Source.Binary.Artifact, dest)
	if tag == "" {
		printf(d.log, "Warning: the binary input %s is not in the output's repository: its tag is left\n", b.Spec.Source.Binary.Artifact)
		return
	}
	pushAuth, err := d.pushAuth(dest)
	if err != nil {
		printf(d.log, "Warning: the binary input's tag %s is left: %v\n", tag, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), untagTimeout)
	defer cancel()
	access := registry.Access{AuthFile: pushAuth, InsecureRegistries: d.Options.InsecureRegistries, CertDir: d.Options.CertDir, UserAgent: "archway-builder"}
	if err := d.untag(ctx, access, tag); err != nil {
		printf(d.log, "Warning: removing the binary input's tag %s: %v\n", tag, err)
		return
	}
	printf(d.log, "Removed the binary input's tag %s\n", tag)
}

// pushAuth is the docker config the build pushes to dest with: the push
// secret's, else that of the first of the service account's pull secrets
// with credentials for dest's registry (as OpenShift picks the builder
// account's docker secret), else none.
func (d *Run) pushAuth(dest string) (registry.AuthFile, error) {
	if d.Options.PushAuthDir != "" || dest == "" {
		return registry.FindAuthFile(d.Options.PushAuthDir)
	}
	return registry.AccountAuthFor(d.Options.AccountAuthDir, registry.Host(dest))
}

func (d *Run) untag(ctx context.Context, access registry.Access, tag string) error {
	if d.Untag != nil {
		return d.Untag(ctx, access, tag)
	}
	return manifestlist.Untag(ctx, access, tag)
}

// fail records a failure and returns the error that makes the exit code 1.
// A build stopped by a signal records nothing: the pod is being deleted
// (the build was cancelled, or the pod evicted), and the controller says
// what happened to the platform.
func (d *Run) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		printf(d.log, "Interrupted: %v\n", err)
		return fmt.Errorf("interrupted: %w", err)
	}
	reason := statusReason(err)
	printf(d.log, "error: %s: %v\n", reason, err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if rerr := d.Reporter.Failed(rctx, report.Failure{
		Reason: reason, Message: err.Error(), LogSnippet: d.tail.String(), Stages: d.stages, Commit: d.commit,
	}); rerr != nil {
		printf(d.log, "Warning: %v\n", rerr)
	}
	if d.Options.TerminationLog != "" {
		if _, serr := os.Stat(d.Options.TerminationLog); serr == nil {
			_ = os.WriteFile(d.Options.TerminationLog, []byte(string(reason)+": "+err.Error()), 0o644)
		}
	}
	return fmt.Errorf("%s: %w", reason, err)
}

func (d *Run) stage(name buildv1.StageName, step buildv1.StepName, start time.Time) {
	d.stageAt(name, step, start, time.Since(start))
}

func (d *Run) stageDuration(name buildv1.StageName, step buildv1.StepName, took time.Duration) {
	d.stageAt(name, step, time.Now().Add(-took), took)
}

func (d *Run) stageAt(name buildv1.StageName, step buildv1.StepName, start time.Time, took time.Duration) {
	t := metav1.NewTime(start.Truncate(time.Second))
	d.stages = append(d.stages, buildv1.StageInfo{
		Name: name, StartTime: t, DurationMilliseconds: took.Milliseconds(),
		Steps: []buildv1.StepInfo{{Name: step, StartTime: t, DurationMilliseconds: took.Milliseconds()}},
	})
}

// statusError is a failure with a reason of its own.
type statusError struct {
	reason buildv1.StatusReason
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }

func (e *statusError) Unwrap() error { return e.err }

// statusReason is the reason a failure records.
func statusReason(err error) buildv1.StatusReason {
	var se *statusError
	if errors.As(err, &se) {
		return se.reason
	}
	return report.Reason(err)
}

// outputReference returns the reference to push to, "" for none.
func outputReference(out buildv1.BuildOutput) (string, error) {
	if out.To == nil {
		return "", nil
	}
	if out.To.Kind != "" && out.To.Kind != "DockerImage" {
		return "", &statusError{reason: buildv1.StatusReasonInvalidOutputReference,
			err: fmt.Errorf("output kind %q is not supported: use DockerImage", out.To.Kind)}
	}
	if out.To.Name == "" {
		return "", &statusError{reason: buildv1.StatusReasonInvalidOutputReference, err: errors.New("output.to has no name")}
	}
	if registry.Host(out.To.Name) == "" {
		return "", &statusError{reason: buildv1.StatusReasonInvalidOutputReference,
			err: fmt.Errorf("output %q is not an image reference", out.To.Name)}
	}
	return out.To.Name, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// printf writes to a build's log, ignoring write errors: the log goes to a
// pod log, and failing to write there must not fail a build.
func printf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// tailBuffer keeps the last max bytes written to it: the end of a build's
// log, for the status of a failed build.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// shortID is an image ID as people read it.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
