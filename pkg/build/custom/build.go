package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
)

// The strategy env variables the custom builder reads; every other variable
// is the build's, as dockerStrategy.env.
const (
	// PlatformsEnv lists the platforms, comma-separated
	// (`oc start-build bc -e PLATFORMS=linux/amd64,linux/arm64`).
	PlatformsEnv = "PLATFORMS"
	// PlatformsAllowedToFailEnv lists the platforms allowed to fail.
	PlatformsAllowedToFailEnv = "PLATFORMS_ALLOWED_TO_FAIL"
	// DockerfilePathEnv is dockerStrategy.dockerfilePath.
	DockerfilePathEnv = "DOCKERFILE_PATH"
	// BuildArgEnvPrefix starts the name of a variable that is a build
	// argument: BUILD_ARG_VERSION=1 is the build argument VERSION=1.
	BuildArgEnvPrefix = "BUILD_ARG_"
	// customBaseImageEnv is what OpenShift's controller adds to a custom
	// strategy's env (the builder image): not the build's.
	customBaseImageEnv = "OPENSHIFT_CUSTOM_BUILD_BASE_IMAGE"
)

// CustomStrategyType is OpenShift's strategy type of a custom builder.
const CustomStrategyType buildv1.BuildStrategyType = "Custom"

// PlatformsAnnotation on a Build or its BuildConfig lists the default
// platforms, comma-separated, used when the strategy's env has no
// PLATFORMS.
const PlatformsAnnotation = "build.archway.dev/platforms"

// Strategy is OpenShift's customStrategy, as OpenShift's controller hands it
// to the builder in BUILD.
type Strategy struct {
	From               corev1.ObjectReference       `json:"from"`
	PullSecret         *corev1.LocalObjectReference `json:"pullSecret,omitempty"`
	Env                []corev1.EnvVar              `json:"env,omitempty"`
	ExposeDockerSocket bool                         `json:"exposeDockerSocket,omitempty"`
	ForcePull          bool                         `json:"forcePull,omitempty"`
	Secrets            []json.RawMessage            `json:"secrets,omitempty"`
	BuildAPIVersion    string                       `json:"buildAPIVersion,omitempty"`
}

// ParseBuild reads the BUILD OpenShift's controller gives a custom builder:
// the Build (as archway's type: the field names are OpenShift's) and its
// custom strategy.
func ParseBuild(data []byte) (*buildv1.Build, *Strategy, error) {
	if len(data) == 0 {
		return nil, nil, fmt.Errorf("$%s is empty: the custom builder runs in the pod OpenShift's build controller makes for a Custom-strategy Build", buildv1.BuildEnv)
	}
	b := &buildv1.Build{}
	if err := json.Unmarshal(data, b); err != nil {
		return nil, nil, fmt.Errorf("reading $%s: %w", buildv1.BuildEnv, err)
	}
	if b.Spec.Strategy.Type != CustomStrategyType || b.Spec.Strategy.CustomStrategy == nil {
		return nil, nil, fmt.Errorf("$%s holds Build %s/%s of strategy %q: the custom builder runs Custom-strategy Builds", buildv1.BuildEnv, b.Namespace, b.Name, b.Spec.Strategy.Type)
	}
	s := &Strategy{}
	if err := json.Unmarshal(b.Spec.Strategy.CustomStrategy.Raw, s); err != nil {
		return nil, nil, fmt.Errorf("reading the Build's customStrategy: %w", err)
	}
	if err := refuseUnknownFields(data); err != nil {
		return nil, nil, err
	}
	return b, s, nil
}

// refuseUnknownFields refuses a Build whose spec (custom strategy
// included) sets a field the custom builder does not know: a field of a
// newer OpenShift would otherwise be dropped while decoding and never
// honoured. The status is OpenShift's controller's and is not read.
func refuseUnknownFields(data []byte) error {
	var build struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &build); err != nil {
		return fmt.Errorf("reading $%s: %w", buildv1.BuildEnv, err)
	}
	var spec struct {
		buildv1.BuildSpec `json:",inline"`
		Strategy          struct {
			buildv1.BuildStrategy `json:",inline"`
			CustomStrategy        *Strategy `json:"customStrategy,omitempty"`
		} `json:"strategy"`
	}
	strict, err := sigsjson.UnmarshalStrict(build.Spec, &spec, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("reading $%s: %w", buildv1.BuildEnv, err)
	}
	if len(strict) > 0 {
		fields := make([]string, 0, len(strict))
		for _, e := range strict {
			fields = append(fields, e.Error())
		}
		return fmt.Errorf("the Build's spec sets fields the custom builder does not know and would ignore (%s): remove them, or run an archway release that supports them", strings.Join(fields, "; "))
	}
	return nil
}

// DockerBuild is the archway Build the custom builder runs for OpenShift's
// Build ob: the same metadata, source, output and common settings, the
// Docker strategy set from the custom strategy (its pull secret, forcePull
// and env), and the platforms from the env's PLATFORMS, else
// defaultPlatforms (the platforms annotation), else none (resolved as for
// any archway Build). It refuses, with a message saying what to change,
// what archway cannot honour (Refuse).
func DockerBuild(ob *buildv1.Build, s *Strategy, defaultPlatforms string) (*buildv1.Build, error) {
	if err := Refuse(ob, s); err != nil {
		return nil, err
	}
	b := ob.DeepCopy()
	b.Status = buildv1.BuildStatus{}
	ds := &buildv1.DockerBuildStrategy{PullSecret: s.PullSecret, ForcePull: s.ForcePull}
	platforms := defaultPlatforms
	for _, e := range s.Env {
		switch {
		case e.Name == PlatformsEnv:
			platforms = e.Value
		case e.Name == PlatformsAllowedToFailEnv:
			b.Spec.PlatformsAllowedToFail = splitList(e.Value)
		case e.Name == DockerfilePathEnv:
			ds.DockerfilePath = e.Value
		case e.Name == customBaseImageEnv:
		case strings.HasPrefix(e.Name, BuildArgEnvPrefix):
			arg := e
			arg.Name = strings.TrimPrefix(e.Name, BuildArgEnvPrefix)
			if arg.Name == "" {
				return nil, fmt.Errorf("customStrategy.env %s names no build argument: write %s<NAME>", e.Name, BuildArgEnvPrefix)
			}
			ds.BuildArgs = append(ds.BuildArgs, arg)
		default:
			ds.Env = append(ds.Env, e)
		}
	}
	b.Spec.Platforms = splitList(platforms)
	if len(b.Spec.PlatformsAllowedToFail) > 0 && len(b.Spec.Platforms) == 0 {
		return nil, fmt.Errorf("%s is set without %s: list the platforms the others are among", PlatformsAllowedToFailEnv, PlatformsEnv)
	}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: ds}
	return b, nil
}

// PlatformsFrom names where DockerBuild took the platforms from, for the
// custom pod's log: the strategy's PLATFORMS, else the PlatformsAnnotation
// (defaultPlatforms), else "" (resolved as for any archway Build, which
// names its own source).
func PlatformsFrom(s *Strategy, defaultPlatforms string) string {
	for _, e := range s.Env {
		if e.Name == PlatformsEnv {
			return "customStrategy.env " + PlatformsEnv
		}
	}
	if defaultPlatforms != "" {
		return "the " + PlatformsAnnotation + " annotation"
	}
	return ""
}

// Refuse says why the custom builder cannot build OpenShift's Build ob as
// its user wrote it, naming the field: every field it would otherwise
// drop. The Docker socket (archway's builder needs none), the strategy's
// secrets (OpenShift mounts them into the custom pod only, never into the
// platforms' pods), image sources (their files are copied by OpenShift's
// own builders, which do not run here), a binary source (OpenShift streams
// the upload into the custom pod's standard input, which the platforms'
// pods cannot read), an output that is not a DockerImage (OpenShift's
// controller resolves image stream tags before the custom pod starts) and
// a BUILD encoded in another API version than the one read here. Nil:
// every field set is honoured.
func Refuse(ob *buildv1.Build, s *Strategy) error {
	switch {
	case s.ExposeDockerSocket:
		return errors.New("customStrategy.exposeDockerSocket is refused: archway's builder needs no Docker socket; remove it")
	case len(s.Secrets) > 0:
		return errors.New("customStrategy.secrets are mounted into the custom builder's pod only, not into the platforms' build pods: use source.secrets")
	case s.BuildAPIVersion != "" && s.BuildAPIVersion != buildv1.GroupVersion.String():
		return fmt.Errorf("customStrategy.buildAPIVersion %q is refused: the custom builder reads the Build as %s; remove it or set that version", s.BuildAPIVersion, buildv1.GroupVersion)
	case ob.Spec.Output.To != nil && ob.Spec.Output.To.Kind != "" && ob.Spec.Output.To.Kind != "DockerImage":
		return fmt.Errorf("output.to of kind %s is refused: the custom builder pushes to a DockerImage reference, "+
			"which OpenShift's build controller gives it in place of an image stream's; run the Build through that controller", ob.Spec.Output.To.Kind)
	case len(ob.Spec.Source.Images) > 0:
		return errors.New("source.images is refused: the custom builder does not copy files from other images into the build context; " +
			"copy them in the Dockerfile instead (COPY --from=<image>)")
	case ob.Spec.Source.Type == buildv1.BuildSourceBinary || ob.Spec.Source.Binary != nil:
		return errors.New("source.binary is refused: OpenShift streams a binary build's upload into the custom builder's pod only, " +
			"where the platforms' build pods cannot read it; build from source.git or source.dockerfile, " +
			"or upload with `kubectl archway start-build --from-dir` to a Docker-strategy BuildConfig")
	}
	return nil
}

// CheckTrustedCA refuses a Build with spec.mountTrustedCA that the
// platforms' pods cannot honour, as build-controller fails it
// (controller.TrustedCAFailure): the configuration cfg names no trusted CA
// bundle, or its ConfigMap in the Build's namespace does not exist or lacks
// the key. When the builder account may not read the ConfigMap, the
// platforms' pods mount it and the kubelet decides.
func CheckTrustedCA(ctx context.Context, kube kubernetes.Interface, b *buildv1.Build, cfg *configv1alpha1.BuildControllerConfig) error {
	if !ptr.Deref(b.Spec.MountTrustedCA, false) {
		return nil
	}
	var cm *corev1.ConfigMap
	if ca := cfg.TrustedCA; ca != nil {
		got, err := kube.CoreV1().ConfigMaps(b.Namespace).Get(ctx, ca.ConfigMapName, metav1.GetOptions{})
		switch {
		case err == nil:
			cm = got
		case apierrors.IsForbidden(err):
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading the trusted CA bundle's ConfigMap %s/%s (spec.mountTrustedCA): %w", b.Namespace, ca.ConfigMapName, err)
		}
	}
	if f := controller.TrustedCAFailure(b, cfg.TrustedCA, cm); f != nil {
		return errors.New(f.Message)
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
