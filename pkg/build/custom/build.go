package custom

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
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
	return b, s, nil
}

// DockerBuild is the archway Build the custom builder runs for OpenShift's
// Build ob: the same metadata, source, output and common settings, the
// Docker strategy set from the custom strategy (its pull secret, forcePull
// and env), and the platforms from the env's PLATFORMS, else
// defaultPlatforms (the platforms annotation), else none (resolved as for
// any archway Build). It refuses, with a message saying what to change,
// what archway cannot honour: the Docker socket, the strategy's secrets
// (mounted into the custom pod only), source images.
func DockerBuild(ob *buildv1.Build, s *Strategy, defaultPlatforms string) (*buildv1.Build, error) {
	if s.ExposeDockerSocket {
		return nil, errors.New("customStrategy.exposeDockerSocket is refused: archway's builder needs no Docker socket; remove it")
	}
	if len(s.Secrets) > 0 {
		return nil, errors.New("customStrategy.secrets are mounted into the custom builder's pod only, not into the platforms' build pods: use source.secrets")
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
