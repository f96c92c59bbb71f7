// Command custom-builder is archway's builder as OpenShift's Custom-strategy
// builder: OpenShift's build controller runs archway's builder image with
// the Build in $BUILD and no command, and `builder` then executes this
// program, which lies beside it in the image. It builds the Build for every
// platform with pods of its own, as build-controller does (pkg/build/custom).
//
// It is a program of its own, not a command of `builder`, because it links
// build-controller's code and client-go's typed clients: in `builder`, which
// buildah re-executes (and copies into memory) for every build step, they
// would add 30 MB and 20 ms to every step.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/build/custom"
	"github.com/archway-build/archway/pkg/placement/image"
)

type customBuildOptions struct {
	kubeconfig   string
	insecureRegs []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newCustomBuildCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "custom-builder:", err)
		os.Exit(1)
	}
}

func newCustomBuildCommand() *cobra.Command {
	opts := customBuildOptions{}
	cmd := &cobra.Command{
		Use:           "custom-builder",
		Short:         "Run an OpenShift Custom-strategy Build for every platform (the builder with no command and $BUILD set)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Long: `custom-builder runs in the pod OpenShift's build controller makes for a Build whose Custom strategy
names archway's builder image; the image runs it when started with no command and $BUILD set. It
reads the Build from $BUILD, builds it with the Docker strategy for every platform (PLATFORMS in the
strategy's env, else the build.archway.dev/platforms annotation of the Build or its BuildConfig, else
resolved from the cluster's nodes) with one pod per platform and the manifest-list pod, as
build-controller does, with build-controller's configuration (the ConfigMap the Role
archway-system/archway-custom-builder-config names; it refuses to start without it), keeps
their status in the MultiArchBuild of the Build's name, and prints every pod's log, each line
prefixed with its platform. The exit code is 0 when the Build completed and 1 otherwise; SIGTERM
(the pod deleted: oc cancel-build) cancels the platforms.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCustomBuild(cmd.Context(), opts) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	f.StringSliceVar(&opts.insecureRegs, "insecure-registry", nil, "a registry (host[:port]) reached over plain HTTP or without TLS checks; repeatable")
	return cmd
}

func runCustomBuild(ctx context.Context, opts customBuildOptions) error {
	ob, strategy, err := custom.ParseBuild([]byte(os.Getenv(buildv1.BuildEnv)))
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = opts.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("connecting to the apiserver: %w", err)
	}
	rc.UserAgent = "archway-builder-custom-build"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	// build-controller's configuration first: without it nothing starts.
	account := cmp.Or(ob.Spec.ServiceAccount, configv1alpha1.DefaultBuilderServiceAccount)
	cfg, err := custom.LoadConfig(ctx, kube, ob.Namespace, account)
	if err != nil {
		return err
	}
	defaults, err := platformsAnnotation(ctx, dyn, ob)
	if err != nil {
		return err
	}
	b, err := custom.DockerBuild(ob, strategy, defaults)
	if err != nil {
		return err
	}
	if err := custom.CheckTrustedCA(ctx, kube, b, &cfg.Build); err != nil {
		return err
	}
	// OpenShift ran this pod as the Build's account: the platforms' pods
	// run as the same one, whatever build.builderServiceAccount says.
	b.Spec.ServiceAccount = account
	if sa := cfg.Build.BuilderServiceAccount; ob.Spec.ServiceAccount == "" && sa != account {
		fmt.Printf("build.builderServiceAccount (%s) does not apply to custom builds: OpenShift runs them, and their platforms' pods, as the Build's service account (%s)\n", sa, account)
	}
	conf, allowed, err := custom.ClusterRegistries(os.Getenv)
	if err != nil {
		return err
	}
	podName := cmp.Or(os.Getenv("POD_NAME"), buildv1.ClassicPodName(ob.Name))
	cas, err := custom.PodRegistryCAs(ctx, kube, ob.Namespace, podName)
	if err != nil {
		return err
	}
	pull, err := pullSecret(os.Getenv(buildv1.PullDockerConfigPathEnv))
	if err != nil {
		return err
	}
	remote := image.RemoteOptions{InsecureRegistries: opts.insecureRegs, UserAgent: "archway-custom-builder"}
	if cas != nil {
		remote.CertDir = controller.RegistryCAsMountDir + "/certs.d"
	}
	if path := os.Getenv(custom.RegistriesConfPathEnv); conf != "" {
		remote.RegistriesConfPath = path
	}
	// The platforms' pods run the image OpenShift runs this pod from (the
	// one the archway-custom-builds policy admitted), not
	// build.builderImage: this program and its builders are one release.
	cfg.Build.BuilderImage = strategy.From.Name
	res, err := custom.Run(ctx, b, custom.Options{
		Kube: kube, Dynamic: dyn, Config: &cfg.Build, InsecureRegistries: opts.insecureRegs,
		RegistriesConf: conf, AllowedRegistries: allowed, RegistryCAs: cas,
		Bases: image.SecretInspector{Inspector: image.NewRemote(remote)}, PullSecret: pull,
		Out: os.Stdout, PodName: podName, PlatformsFrom: custom.PlatformsFrom(strategy, defaults),
	})
	if err != nil {
		return err
	}
	if res.Phase != buildv1.BuildPhaseComplete {
		msg := fmt.Sprintf("the build ended %s", res.Phase)
		if res.Reason != "" {
			msg += fmt.Sprintf(" (%s): %s", res.Reason, res.Message)
		}
		return errors.New(msg)
	}
	return nil
}

// pullSecret reads the strategy's pull secret OpenShift mounts into the
// custom pod ($PULL_DOCKERCFG_PATH; "": none) for the check of the base
// images: its .dockerconfigjson, else its .dockercfg.
func pullSecret(dir string) (custom.PullSecret, error) {
	if dir == "" {
		return custom.PullSecret{}, nil
	}
	for _, f := range []struct {
		key string
		typ corev1.SecretType
	}{{corev1.DockerConfigJsonKey, corev1.SecretTypeDockerConfigJson}, {corev1.DockerConfigKey, corev1.SecretTypeDockercfg}} {
		data, err := os.ReadFile(filepath.Join(dir, f.key)) //nolint:gosec // G703: the secret OpenShift mounts where $PULL_DOCKERCFG_PATH says
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return custom.PullSecret{}, fmt.Errorf("reading the pull secret ($%s): %w", buildv1.PullDockerConfigPathEnv, err)
		}
		return custom.PullSecret{Type: string(f.typ), Data: data}, nil
	}
	return custom.PullSecret{}, nil
}

// platformsAnnotation is the default platforms list: the Build's
// build.archway.dev/platforms annotation, else its BuildConfig's (when the
// builder account may read it).
func platformsAnnotation(ctx context.Context, dyn dynamic.Interface, b *buildv1.Build) (string, error) {
	if v := b.Annotations[custom.PlatformsAnnotation]; v != "" {
		return v, nil
	}
	bc := b.Annotations[buildv1.BuildConfigAnnotation]
	if bc == "" {
		return "", nil
	}
	u, err := dyn.Resource(buildv1.GroupVersion.WithResource("buildconfigs")).Namespace(b.Namespace).Get(ctx, bc, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading BuildConfig %s/%s for its %s annotation: %w", b.Namespace, bc, custom.PlatformsAnnotation, err)
	}
	return u.GetAnnotations()[custom.PlatformsAnnotation], nil
}
