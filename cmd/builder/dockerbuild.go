package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagebuild"
	"github.com/archway-build/archway/pkg/build/report"
	"github.com/archway-build/archway/pkg/build/source"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// Environment variables a build pod gets besides OpenShift's BUILD,
// PUSH_DOCKERCFG_PATH and PULL_DOCKERCFG_PATH: its own name and namespace,
// from the downward API. Without them the pod name is the host name (which
// is the pod's name in Kubernetes) and the namespace is the Build's.
const (
	podNameEnv      = "POD_NAME"
	podNamespaceEnv = "POD_NAMESPACE"
)

// The emptyDir volumes the build controller mounts in a build pod for the
// builder's scratch files and its container store (pkg/build's
// BuildWorkDir and ContainerStorageDir). The builder uses them when they
// are mount points, and a temporary directory otherwise (on a machine,
// where /var/lib/containers/storage may be another tool's store).
const (
	podWorkDir    = "/tmp/build"
	podStorageDir = "/var/lib/containers/storage"
	// sourceSecretPathEnv names the directory of the mounted source
	// secret (pkg/build's SourceSecretPathEnv).
	sourceSecretPathEnv = "SOURCE_SECRET_PATH"
)

// logTailBytes is how much of the end of the build's output a failure
// records as its log snippet.
const logTailBytes = 4000

type dockerBuildOptions struct {
	kubeconfig         string
	workDir            string
	storageDir         string
	sourceSecretDir    string
	buildSecretsDir    string
	buildConfigMapsDir string
	binaryArchive      string
	format             string
	storageDriver      string
	insecureRegistries []string
	noReport           bool
	terminationLog     string
}

func newDockerBuildCommand() *cobra.Command {
	opts := dockerBuildOptions{}
	cmd := &cobra.Command{
		Use:   "docker-build",
		Short: "Build the Build in $BUILD for its target platform, push it and record the outcome",
		Long: `docker-build runs in a build pod. It reads the Build from $BUILD (JSON, as OpenShift's builder
does), fetches its source, builds its Dockerfile with buildah and pushes the image to
spec.output.to with the credentials in $PUSH_DOCKERCFG_PATH (base images are pulled with those in
$PULL_DOCKERCFG_PATH).

With one target platform in spec.platforms (a platform's pod of a multi-platform Build) it builds
for that platform and records the outcome in that platform's entry of status.platforms with
server-side apply, under a field manager of its own: phase Running when it starts, then Complete
with the pushed image's digest and the platform read back from the image's config, or Failed with
a reason (FetchSourceFailed, InvalidContextDirectory, ManageDockerfileFailed, DockerBuildFailed,
PushImageToRegistryFailed, ...) and message. Without target platforms (a classic build) it builds
for this machine's platform and records the output as OpenShift's builder does.

The exit code is 0 when the image was built (and pushed), else 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDockerBuild(cmd.Context(), opts, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	f.StringVar(&opts.workDir, "work-dir", "", "directory for the source, caches and temporary files (default: "+podWorkDir+" when it is a mount, as in a build pod, else a temporary directory, removed)")
	f.StringVar(&opts.storageDir, "storage-dir", "", "container store root (default: "+podStorageDir+" when it is a mount, as in a build pod, else in the work directory)")
	f.StringVar(&opts.sourceSecretDir, "source-secret-dir", source.DefaultSecretDir, "directory the source secret is mounted in, if it exists (default: $"+sourceSecretPathEnv+" when set)")
	f.StringVar(&opts.buildSecretsDir, "build-secrets-dir", source.DefaultBuildSecretsDir, "directory holding the mounts of spec.source.secrets, one per Secret name")
	f.StringVar(&opts.buildConfigMapsDir, "build-configmaps-dir", source.DefaultBuildConfigMapsDir, "directory holding the mounts of spec.source.configMaps, one per ConfigMap name")
	f.StringVar(&opts.binaryArchive, "binary-archive", "", "file holding a Binary source's archive (default: standard input)")
	f.StringVar(&opts.format, "format", string(imagebuild.FormatDocker), "manifest format of the image: docker (as OpenShift's builder) or oci")
	f.StringVar(&opts.storageDriver, "storage-driver", "", "container store driver: overlay or vfs (default: overlay when it works, else vfs)")
	f.StringSliceVar(&opts.insecureRegistries, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are)")
	f.BoolVar(&opts.noReport, "no-report", false, "do not write the Build's status (no apiserver needed)")
	f.StringVar(&opts.terminationLog, "termination-log", "/dev/termination-log", "file to write the failure reason to, if it exists (the pod's termination message)")
	return cmd
}

// dockerBuild is one run of `builder docker-build`.
type dockerBuild struct {
	opts     dockerBuildOptions
	build    *buildv1.Build
	target   platform.Platform // zero for a classic build
	reporter report.Reporter
	log      io.Writer
	tail     *tailBuffer
	stages   []buildv1.StageInfo
}

func runDockerBuild(ctx context.Context, opts dockerBuildOptions, stdin io.Reader, stdout io.Writer) error {
	build, err := buildFromEnv()
	if err != nil {
		return err
	}
	d := &dockerBuild{opts: opts, build: build, tail: &tailBuffer{max: logTailBytes}}
	d.log = io.MultiWriter(stdout, d.tail)
	if d.target, err = targetPlatform(build); err != nil {
		return err
	}
	if d.reporter, err = d.newReporter(); err != nil {
		return err
	}
	if err := d.reporter.Running(ctx); err != nil {
		printf(d.log, "Warning: %v\n", err)
	}
	res, buildErr := d.run(ctx, stdin)
	if buildErr != nil {
		return d.fail(ctx, buildErr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := d.reporter.Complete(rctx, res); err != nil {
		// The controller reads the outcome from the status: an image it
		// cannot see is a failed platform.
		return d.fail(ctx, fmt.Errorf("the image was pushed, but recording it failed: %w", err))
	}
	return nil
}

// buildFromEnv reads the Build from $BUILD.
func buildFromEnv() (*buildv1.Build, error) {
	raw := os.Getenv(buildv1.BuildEnv)
	if raw == "" {
		return nil, fmt.Errorf("no Build: $%s must hold the Build as JSON", buildv1.BuildEnv)
	}
	b := &buildv1.Build{}
	if err := json.Unmarshal([]byte(raw), b); err != nil {
		return nil, fmt.Errorf("reading the Build in $%s: %w", buildv1.BuildEnv, err)
	}
	if b.Name == "" || b.Namespace == "" {
		return nil, fmt.Errorf("the Build in $%s has no name or namespace", buildv1.BuildEnv)
	}
	return b, nil
}

// targetPlatform returns the platform a build pod builds: the Build's one
// platform, or the zero Platform (this machine's) for a classic build.
func targetPlatform(b *buildv1.Build) (platform.Platform, error) {
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
	return platform.Platform{}, fmt.Errorf("the Build in $%s has %d platforms: a build pod builds one (the controller gives each pod its own)",
		buildv1.BuildEnv, len(b.Spec.Platforms))
}

func (d *dockerBuild) newReporter() (report.Reporter, error) {
	if d.opts.noReport {
		return report.Discard{}, nil
	}
	c, err := report.NewClient(d.opts.kubeconfig, "archway-builder-docker-build")
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: d.build.Namespace, Name: d.build.Name}
	if ns := os.Getenv(podNamespaceEnv); ns != "" && ns != key.Namespace {
		return nil, fmt.Errorf("the Build %s is not in the pod's namespace %s", key, ns)
	}
	if d.target == (platform.Platform{}) {
		return report.NewBuildReporter(c, key), nil
	}
	podName := os.Getenv(podNameEnv)
	if podName == "" {
		podName, _ = os.Hostname()
	}
	return report.NewPlatformReporter(c, key, d.build.Spec.Platforms[0], podName), nil
}

// run fetches, builds and pushes.
func (d *dockerBuild) run(ctx context.Context, stdin io.Reader) (report.Result, error) {
	spec := d.build.Spec
	if spec.Strategy.Type != buildv1.DockerBuildStrategyType {
		return report.Result{}, &statusError{reason: buildv1.StatusReasonUnsupportedBuildStrategy,
			err: fmt.Errorf("strategy %q is not supported by docker-build: use Docker", spec.Strategy.Type)}
	}
	strategy := spec.Strategy.DockerStrategy
	if strategy == nil {
		strategy = &buildv1.DockerBuildStrategy{}
	}
	dest, err := outputReference(spec.Output)
	if err != nil {
		return report.Result{}, err
	}
	args, err := buildArgs(strategy.BuildArgs)
	if err != nil {
		return report.Result{}, err
	}
	env, err := buildEnv(strategy.Env)
	if err != nil {
		return report.Result{}, err
	}
	pushAuth, err := registry.FindAuthFile(os.Getenv(buildv1.PushDockerConfigPathEnv))
	if err != nil {
		return report.Result{}, &statusError{reason: buildv1.StatusReasonPushImageToRegistryFailed, err: err}
	}
	pullAuth, err := registry.FindAuthFile(os.Getenv(buildv1.PullDockerConfigPathEnv))
	if err != nil {
		return report.Result{}, &statusError{reason: buildv1.StatusReasonDockerBuildFailed, err: err}
	}

	workDir, storageDir := d.opts.workDir, d.opts.storageDir
	if workDir == "" && isMountPoint(podWorkDir) {
		workDir = podWorkDir
	}
	if storageDir == "" && isMountPoint(podStorageDir) {
		storageDir = podStorageDir
	}
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "archway-docker-build-"); err != nil {
			return report.Result{}, err
		}
		defer func() { _ = os.RemoveAll(workDir) }()
	}
	b, err := imagebuild.New(imagebuild.Config{
		WorkDir:            filepath.Join(workDir, "buildah"),
		StorageDir:         storageDir,
		StorageDriver:      d.opts.storageDriver,
		InsecureRegistries: d.opts.insecureRegistries,
	})
	if err != nil {
		return report.Result{}, err
	}
	defer closeBuilder(b, d.log)
	if err := os.Setenv("TMPDIR", b.TempDir()); err != nil {
		return report.Result{}, err
	}

	// Fetch the source.
	fetchStart := time.Now()
	srcOpts := source.Options{
		Source:         spec.Source,
		Revision:       spec.Revision,
		DockerfilePath: strategy.DockerfilePath,
		SecretsDir:     d.opts.buildSecretsDir,
		ConfigMapsDir:  d.opts.buildConfigMapsDir,
		Out:            d.log,
	}
	secretDir := d.opts.sourceSecretDir
	if env := os.Getenv(sourceSecretPathEnv); env != "" && secretDir == source.DefaultSecretDir {
		secretDir = env
	}
	if info, err := os.Stat(secretDir); err == nil && info.IsDir() && spec.Source.SourceSecret != nil { //nolint:gosec // the pod spec names the directory
		srcOpts.SecretDir = secretDir
	}
	if source.Type(spec.Source) == buildv1.BuildSourceBinary {
		srcOpts.Binary = stdin
		if d.opts.binaryArchive != "" {
			f, err := os.Open(d.opts.binaryArchive)
			if err != nil {
				return report.Result{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: err}
			}
			defer func() { _ = f.Close() }()
			srcOpts.Binary = f
		}
	}
	fetched, err := source.Fetch(ctx, srcOpts, filepath.Join(workDir, "source"))
	d.stage(buildv1.StageFetchInputs, buildv1.StepFetchGitSource, fetchStart)
	if err != nil {
		return report.Result{}, err
	}
	if rev := fetched.Revision; rev != nil && rev.Git != nil {
		printf(d.log, "Checked out %s (%s)\n", rev.Git.Commit, firstLine(rev.Git.Message))
	}

	// Build, push, read back.
	req := imagebuild.Request{
		ContextDir: fetched.ContextDir,
		Dockerfile: fetched.Dockerfile,
		Platform:   d.target,
		Args:       args,
		Labels:     imageLabels(d.build, fetched.Revision),
		Env:        env,
		RunMounts:  runMounts(strategy.Volumes, buildVolumeMountDir),
		NoCache:    strategy.NoCache,
		ForcePull:  strategy.ForcePull,
		Format:     imagebuild.Format(d.opts.format),
		PullAuth:   pullAuth,
		Out:        d.log,
	}
	if strategy.From != nil {
		req.From = strategy.From.Name
	}
	if d.target == (platform.Platform{}) {
		req.Platform = imagebuild.HostPlatform()
	}
	printf(d.log, "Building %s/%s for %s\n", d.build.Namespace, d.build.Name, req.Platform)
	out, err := b.BuildAndPush(ctx, req, dest, pushAuth)
	if out.Build.Duration > 0 || err != nil {
		d.stageDuration(buildv1.StageBuild, buildv1.StepDockerBuild, out.Build.Duration)
	}
	if out.Pushed.Duration > 0 {
		d.stageDuration(buildv1.StagePushImage, buildv1.StepPushDockerImage, out.Pushed.Duration)
	}
	if err != nil {
		return report.Result{}, err
	}
	res := report.Result{Stages: d.stages}
	if dest == "" {
		printf(d.log, "Built %s; the Build has no output, so nothing was pushed\n", shortID(out.Build.ImageID))
		return res, nil
	}
	res.OutputReference = dest
	res.Image = &out.Image
	printf(d.log, "Pushed %s (%s/%s", out.Image.Reference, out.Image.Platform.OS, out.Image.Platform.Architecture)
	if out.Image.Platform.Variant != "" {
		printf(d.log, "/%s", out.Image.Platform.Variant)
	}
	printf(d.log, ")\n")
	return res, nil
}

// fail records a failure and returns the error that makes the exit code 1.
// A build stopped by a signal records nothing: the pod is being deleted
// (the build was cancelled, or the pod evicted), and the controller says
// what happened to the platform.
func (d *dockerBuild) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		printf(d.log, "Interrupted: %v\n", err)
		return fmt.Errorf("interrupted: %w", err)
	}
	reason := statusReason(err)
	printf(d.log, "error: %s: %v\n", reason, err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if rerr := d.reporter.Failed(rctx, report.Failure{
		Reason: reason, Message: err.Error(), LogSnippet: d.tail.String(), Stages: d.stages,
	}); rerr != nil {
		printf(d.log, "Warning: %v\n", rerr)
	}
	if d.opts.terminationLog != "" {
		if _, serr := os.Stat(d.opts.terminationLog); serr == nil {
			_ = os.WriteFile(d.opts.terminationLog, []byte(string(reason)+": "+err.Error()), 0o644)
		}
	}
	return fmt.Errorf("%s: %w", reason, err)
}

func (d *dockerBuild) stage(name buildv1.StageName, step buildv1.StepName, start time.Time) {
	d.stageAt(name, step, start, time.Since(start))
}

func (d *dockerBuild) stageDuration(name buildv1.StageName, step buildv1.StepName, took time.Duration) {
	d.stageAt(name, step, time.Now().Add(-took), took)
}

func (d *dockerBuild) stageAt(name buildv1.StageName, step buildv1.StepName, start time.Time, took time.Duration) {
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

// isMountPoint reports whether path is a mount point, as the emptyDir
// volumes of a build pod are.
func isMountPoint(path string) bool {
	mounted, err := mountinfo.Mounted(path)
	return err == nil && mounted
}
