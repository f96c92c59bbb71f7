package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/manifestlist"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/registry"
)

type manifestListOptions struct {
	kubeconfig     string
	build          string // namespace/name, instead of $BUILD
	authFile       string
	insecure       bool
	insecureRegs   []string
	waitTimeout    time.Duration
	terminationLog string
	removeTags     bool // the pod build-controller starts with --remove-tags (build.RemoveTagsArg)
}

func newManifestListCommand() *cobra.Command {
	opts := manifestListOptions{}
	cmd := &cobra.Command{
		Use:   "manifest-list",
		Short: "Wait for every platform of a Build, push its manifest list and untag the per-platform images",
		Long: `manifest-list runs in the last pod of a multi-platform Build. It reads the Build named by
$BUILD (the Build as JSON, as in every build pod) from the apiserver, waits until every entry of
status.platforms has finished, and then:

  - checks for version skew: a platform recorded Complete without an image digest, an image digest
    the output repository does not hold, or an image config for another platform fails the build
    with reason PlatformVersionSkew, naming the platform;
  - leaves out failed platforms listed in spec.platformsAllowedToFail, and fails (reason
    PlatformBuildFailed) when another platform failed;
  - pushes an OCI image index (a Docker manifest list when every image is Docker schema 2) of the
    platforms that succeeded to spec.output.to, and records its digest in
    status.output.to.imageDigest and the output in status.outputDockerImageReference;
  - removes every per-platform tag (DELETE of the tag, never of a digest), also when the build
    failed; untag errors are logged and ignored. The tags removed are computed from the spec:
    spec.output.to with the suffix of each platform of the Build in $BUILD (the platforms the
    controller resolved), else of the Build's spec.platforms; never a reference read from status.

When the Build has already ended Failed, Error or Cancelled (the controller starts this pod then,
once every platform pod has ended, so that no late push can tag again), it only removes the
per-platform tags, and fails when they cannot be removed.

Registry credentials come from the docker config in $PUSH_DOCKERCFG_PATH (or --authfile).
Loopback registries and those named with --insecure-registry are reached without TLS checks.
The exit code is 0 when the manifest list was pushed and 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManifestList(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	f.StringVar(&opts.build, "build", "", "the Build as namespace/name, instead of reading $"+buildv1.BuildEnv)
	f.StringVar(&opts.authFile, "authfile", "", "docker config file with the push credentials (default: the one in $"+buildv1.PushDockerConfigPathEnv+")")
	f.BoolVar(&opts.insecure, "insecure", false, "reach every registry over plain HTTP or without TLS verification")
	f.StringSliceVar(&opts.insecureRegs, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are; registries.conf can also mark them)")
	f.DurationVar(&opts.waitTimeout, "wait-timeout", 2*time.Hour, "how long to wait for the platforms to finish (bounded further by spec.completionDeadlineSeconds)")
	f.BoolVar(&opts.removeTags, "remove-tags", false, "only remove the per-platform tags of a Build that ended without a manifest list (build-controller starts it so once every platform pod has ended)")
	f.StringVar(&opts.terminationLog, "termination-log", "/dev/termination-log", "file to write the failure reason to, if it exists (the pod's termination message)")
	return cmd
}

func runManifestList(ctx context.Context, opts manifestListOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	key, platforms, err := buildKey(opts.build)
	if err != nil {
		return err
	}
	authPath := opts.authFile
	if authPath == "" {
		authPath = os.Getenv(buildv1.PushDockerConfigPathEnv)
	}
	authFile, err := registry.FindAuthFile(authPath)
	if err != nil {
		return err
	}
	if authPath == "" {
		// No push secret: the service account's pull secret for the
		// output's registry, as the platforms' pods push with.
		if authFile, err = registry.AccountAuthFor(os.Getenv(buildv1.AccountDockerConfigPathEnv), registry.Host(outputOfBuildEnv())); err != nil {
			return err
		}
	}
	insecure := opts.insecureRegs
	if opts.insecure {
		insecure = append(insecure, registry.AllRegistries)
	}
	c, err := report.NewClient(opts.kubeconfig, manifestlist.FieldManager)
	if err != nil {
		return err
	}
	run := &manifestlist.Run{
		Builds:         c,
		Registry:       manifestlist.Registries{},
		Key:            key,
		Access:         registry.Access{AuthFile: authFile, InsecureRegistries: insecure, CertDir: os.Getenv(buildv1.RegistryCertDirEnv), UserAgent: "archway-builder"},
		Out:            out,
		TerminationLog: opts.terminationLog,
		WaitTimeout:    opts.waitTimeout,
		Platforms:      platforms,
		RemoveTagsOnly: opts.removeTags,
		PodUID:         os.Getenv(podUIDEnv),
	}
	return run.Do(ctx)
}

// buildKey names the Build: --build, else the metadata of the Build in
// $BUILD. It also returns the platforms of the Build in $BUILD, which the
// controller resolved: the per-platform tags removed are theirs.
func buildKey(flag string) (types.NamespacedName, []string, error) {
	raw := os.Getenv(buildv1.BuildEnv)
	var b buildv1.Build
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &b); err != nil {
			return types.NamespacedName{}, nil, fmt.Errorf("reading the Build in $%s: %w", buildv1.BuildEnv, err)
		}
	}
	if flag != "" {
		ns, name, ok := strings.Cut(flag, "/")
		if !ok || ns == "" || name == "" {
			return types.NamespacedName{}, nil, fmt.Errorf("--build %q: want namespace/name", flag)
		}
		if b.Namespace != ns || b.Name != name {
			// $BUILD describes another Build: its platforms are not this one's.
			b.Spec.Platforms = nil
		}
		return types.NamespacedName{Namespace: ns, Name: name}, b.Spec.Platforms, nil
	}
	if raw == "" {
		return types.NamespacedName{}, nil, fmt.Errorf("no Build: set $%s to the Build as JSON (as build pods have it) or pass --build namespace/name", buildv1.BuildEnv)
	}
	if b.Name == "" || b.Namespace == "" {
		return types.NamespacedName{}, nil, fmt.Errorf("the Build in $%s has no name or namespace", buildv1.BuildEnv)
	}
	return types.NamespacedName{Namespace: b.Namespace, Name: b.Name}, b.Spec.Platforms, nil
}

// outputOfBuildEnv is the output image of the Build in $BUILD, "" for none.
func outputOfBuildEnv() string {
	var b buildv1.Build
	if err := json.Unmarshal([]byte(os.Getenv(buildv1.BuildEnv)), &b); err != nil || b.Spec.Output.To == nil {
		return ""
	}
	return b.Spec.Output.To.Name
}
