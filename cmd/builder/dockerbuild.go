package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/moby/sys/mountinfo"
	"github.com/spf13/cobra"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/docker"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// Environment variables a build pod gets besides OpenShift's BUILD,
// PUSH_DOCKERCFG_PATH and PULL_DOCKERCFG_PATH: its own name, namespace and
// UID, from the downward API. Without them the pod name is the host name
// (which is the pod's name in Kubernetes) and the namespace is the Build's;
// with the UID, the builder waits for build-controller to record it in the
// Build before it writes the Build's status (the status-writers policy
// admits only the recorded pod).
const (
	podNameEnv      = "POD_NAME"
	podNamespaceEnv = "POD_NAMESPACE"
	podUIDEnv       = "POD_UID"
)

// The emptyDir volumes the build controller mounts in a build pod for the
// builder's scratch files and its container store (pkg/build/controller's
// BuildWorkDir and ContainerStorageDir). The builder uses them when they
// are mount points, and a temporary directory otherwise (on a machine,
// where /var/lib/containers/storage may be another tool's store).
const (
	podWorkDir    = "/tmp/build"
	podStorageDir = "/var/lib/containers/storage"
	// sourceSecretPathEnv names the directory of the mounted source
	// secret (pkg/build/controller's SourceSecretPathEnv).
	sourceSecretPathEnv = "SOURCE_SECRET_PATH"
)

type dockerBuildOptions struct {
	kubeconfig         string
	workDir            string
	storageDir         string
	sourceSecretDir    string
	buildSecretsDir    string
	buildConfigMapsDir string
	trustedCADir       string
	binaryArchive      string
	format             string
	storageDriver      string
	insecureRegistries []string
	noReport           bool
	terminationLog     string
	allowFileGitURIs   bool
	requireUserNS      bool
}

func newDockerBuildCommand() *cobra.Command {
	opts := dockerBuildOptions{}
	cmd := &cobra.Command{
		Use:   "docker-build",
		Short: "Build the Build in $BUILD for its target platform, push it and record the outcome",
		Long: `docker-build runs in a build pod. It reads the Build from $BUILD (JSON, as OpenShift's builder
does), fetches its source, builds its Dockerfile with buildah (a Source strategy's Dockerfile is
generated from its builder image and S2I scripts, as OpenShift's builder does) and pushes the image to
spec.output.to with the credentials in $PUSH_DOCKERCFG_PATH (base images are pulled with those in
$PULL_DOCKERCFG_PATH). Images are pulled through the mirrors of the cluster's registry
configuration in $ARCHWAY_REGISTRIES_CONF (a registries.conf, version 2, as build-controller
generates it), and an image on a registry it blocks is refused.

With one target platform in spec.platforms (a platform's pod of a multi-platform Build) it builds
for that platform and records the outcome in that platform's entry of status.platforms with
server-side apply, under a field manager of its own: phase Running when the Dockerfile's steps
begin (or after a second without a step, e.g. a slow fetch; a result reused from the layer cache
sooner is written once, with its outcome), then Complete with the pushed image's digest and the platform read back from the image's config, or Failed with
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
	f.StringVar(&opts.trustedCADir, "trusted-ca-dir", docker.TrustedCAMountDir, "directory holding the cluster's trusted CA bundle ("+docker.TrustedCABundleFile+"), given to the RUN steps of a Build with mountTrustedCA")
	f.StringVar(&opts.binaryArchive, "binary-archive", "", "file holding a Binary source's archive (default: standard input)")
	f.StringVar(&opts.format, "format", string(image.FormatDocker), "manifest format of the image: docker (as OpenShift's builder) or oci")
	f.StringVar(&opts.storageDriver, "storage-driver", "", "container store driver: overlay or vfs (default: overlay when it works, else vfs)")
	f.StringSliceVar(&opts.insecureRegistries, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are)")
	f.BoolVar(&opts.noReport, "no-report", false, "do not write the Build's status (no apiserver needed)")
	f.StringVar(&opts.terminationLog, "termination-log", "/dev/termination-log", "file to write the failure reason to, if it exists (the pod's termination message)")
	f.BoolVar(&opts.allowFileGitURIs, allowFileGitURIsFlag, false, "let a Git source name a local repository (file:// or a path); build-controller passes it when its configuration allows it")
	f.BoolVar(&opts.requireUserNS, buildv1.RequireUserNamespaceFlag, false, "refuse to build (reason UserNamespaceIgnored) unless running in a user namespace of its own; build-controller passes it to unprivileged build pods (hostUsers: false)")
	return cmd
}

// allowFileGitURIsFlag is pkg/build/controller's AllowFileGitURIsFlag.
const allowFileGitURIsFlag = "allow-file-git-uris"

func runDockerBuild(ctx context.Context, opts dockerBuildOptions, stdin io.Reader, stdout io.Writer) error {
	build, err := buildFromEnv()
	if err != nil {
		return err
	}
	raiseLogLevel(build, stdout)
	target, err := docker.TargetPlatform(build)
	if err != nil {
		return fmt.Errorf("the Build in $%s: %w", buildv1.BuildEnv, err)
	}
	reporter, revisions, err := newReporter(opts, build, target)
	if err != nil {
		return err
	}
	workDir, storageDir := opts.workDir, opts.storageDir
	if workDir == "" && isMountPoint(podWorkDir) {
		workDir = podWorkDir
	}
	if storageDir == "" && isMountPoint(podStorageDir) {
		storageDir = podStorageDir
	}
	disposable := disposableStore(opts, workDir, storageDir)
	secretDir := opts.sourceSecretDir
	if env := os.Getenv(sourceSecretPathEnv); env != "" && secretDir == source.DefaultSecretDir {
		secretDir = env
	}
	registries, err := registriesFromEnv()
	if err != nil {
		return err
	}
	run := &docker.Run{
		Build:     build,
		Target:    target,
		Reporter:  reporter,
		Revisions: revisions,
		Options: docker.Options{
			WorkDir:              workDir,
			StorageDir:           storageDir,
			StorageDriver:        opts.storageDriver,
			Disposable:           disposable,
			InsecureRegistries:   opts.insecureRegistries,
			CertDir:              os.Getenv(buildv1.RegistryCertDirEnv),
			Registries:           registries,
			AllowedRegistries:    allowedFromEnv(),
			Format:               image.Format(opts.format),
			SourceSecretDir:      secretDir,
			BuildSecretsDir:      opts.buildSecretsDir,
			BuildConfigMapsDir:   opts.buildConfigMapsDir,
			BinaryArchive:        opts.binaryArchive,
			TrustedCADir:         opts.trustedCADir,
			PushAuthDir:          os.Getenv(buildv1.PushDockerConfigPathEnv),
			PullAuthDir:          os.Getenv(buildv1.PullDockerConfigPathEnv),
			AccountAuthDir:       os.Getenv(buildv1.AccountDockerConfigPathEnv),
			TerminationLog:       opts.terminationLog,
			AllowFileGitURIs:     opts.allowFileGitURIs,
			RequireUserNamespace: opts.requireUserNS,
		},
		Stdin: stdin,
		Out:   stdout,
	}
	return run.Do(ctx)
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

// newReporter records the build's outcome in its Build: a platform's entry,
// or a classic build's status. With it come the Build's revisions, which
// pin the commit every platform builds (none with --no-report).
func newReporter(opts dockerBuildOptions, build *buildv1.Build, target platform.Platform) (report.Reporter, docker.Revisions, error) {
	if opts.noReport {
		return report.Discard{}, nil, nil
	}
	c, err := report.NewClient(opts.kubeconfig, "archway-builder-docker-build")
	if err != nil {
		return nil, nil, err
	}
	key := types.NamespacedName{Namespace: build.Namespace, Name: build.Name}
	if ns := os.Getenv(podNamespaceEnv); ns != "" && ns != key.Namespace {
		return nil, nil, fmt.Errorf("the Build %s is not in the pod's namespace %s", key, ns)
	}
	// Each write waits for build-controller to record this pod's UID in
	// the Build: the policies admit a pod's writes by it.
	uid := os.Getenv(podUIDEnv)
	if target == (platform.Platform{}) {
		r := report.NewBuildReporter(c, key)
		revisions := report.BuildRevisions{Client: c, Key: key, Manager: report.ClassicFieldManager}
		if uid != "" {
			r.AwaitPodUID(c, uid)
			revisions.Recorded = report.PodUIDRecorded("", uid)
		}
		return r, revisions, nil
	}
	podName := os.Getenv(podNameEnv)
	if podName == "" {
		podName, _ = os.Hostname()
	}
	p := build.Spec.Platforms[0]
	r := report.NewPlatformReporter(c, key, p, podName)
	revisions := report.BuildRevisions{Client: c, Key: key, Manager: report.FieldManager(p)}
	if uid != "" {
		r.AwaitPodUID(c, uid)
		revisions.Recorded = report.PodUIDRecorded(p, uid)
	}
	return r, revisions, nil
}

// isMountPoint reports whether path is a mount point, as the emptyDir
// volumes of a build pod are.
func isMountPoint(path string) bool {
	mounted, err := mountinfo.Mounted(path)
	return err == nil && mounted
}

// disposableStore says whether the container store goes with the build,
// given the directories asked for in opts and those chosen: it does when it
// is the pod's emptyDir with the pod's work directory beside it, or inside
// a work directory that is the pod's or a temporary one; never when a
// directory was asked for, or when /var/lib/containers/storage is a mount
// of a machine's own (no pod work directory beside it).
func disposableStore(opts dockerBuildOptions, workDir, storageDir string) bool {
	if opts.workDir != "" || opts.storageDir != "" {
		return false
	}
	return storageDir == "" || (storageDir == podStorageDir && workDir == podWorkDir)
}

// allowedFromEnv reads the allowed registry scopes a build pod is handed
// in $ARCHWAY_ALLOWED_REGISTRIES; unset or empty: every registry.
func allowedFromEnv() []string {
	var out []string
	for _, s := range strings.Split(os.Getenv(buildv1.AllowedRegistriesEnv), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// registriesFromEnv reads the cluster's registry configuration a build pod
// is handed in $ARCHWAY_REGISTRIES_CONF; unset or empty: none.
func registriesFromEnv() ([]sysregistriesv2.Registry, error) {
	text := os.Getenv(buildv1.RegistriesConfEnv)
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	conf, err := registry.DecodeConf(text)
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", buildv1.RegistriesConfEnv, err)
	}
	return conf.Registries, nil
}
