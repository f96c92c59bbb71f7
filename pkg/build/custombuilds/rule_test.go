package custombuilds

import (
	"slices"
	"strings"
	"testing"

	openshiftbuildv1 "github.com/openshift/api/build/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	archway = "quay.io/archway/builder@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	cm      = "archway-system/archway-custom-builder"
)

func custom(kind, name string, expose bool) *openshiftbuildv1.BuildStrategy {
	return &openshiftbuildv1.BuildStrategy{Type: customType, CustomStrategy: &openshiftbuildv1.CustomBuildStrategy{
		From: corev1.ObjectReference{Kind: kind, Name: name}, ExposeDockerSocket: expose,
	}}
}

func withEnv(s *openshiftbuildv1.BuildStrategy, names ...string) *openshiftbuildv1.BuildStrategy {
	for _, n := range names {
		s.CustomStrategy.Env = append(s.CustomStrategy.Env, corev1.EnvVar{Name: n, Value: "x"})
	}
	return s
}

func withSecret(s *openshiftbuildv1.BuildStrategy) *openshiftbuildv1.BuildStrategy {
	s.CustomStrategy.Secrets = []openshiftbuildv1.SecretSpec{{SecretSource: corev1.LocalObjectReference{Name: "creds"}, MountPath: "/var/run/configs/openshift.io/build-system"}}
	return s
}

func TestAllowedImages(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  []string
	}{
		{"", nil},
		{archway, []string{archway}},
		{" " + archway + " , quay.io/archway/builder:latest,,", []string{archway}},
		{"quay.io/a/b@sha256:" + strings.Repeat("2", 64) + "," + archway, []string{"quay.io/a/b@sha256:" + strings.Repeat("2", 64), archway}},
	} {
		if got := AllowedImages(tt.value); !slices.Equal(got, tt.want) {
			t.Errorf("AllowedImages(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	allowed := archway
	for _, tt := range []struct {
		name   string
		s      *openshiftbuildv1.BuildStrategy
		images string
		refuse []string // each in the message; none admits
	}{
		{"archway's image by digest", custom("DockerImage", archway, false), allowed, nil},
		{"another image", custom("DockerImage", "quay.io/evil/builder:1", false), allowed,
			[]string{"may run only archway's builder image, by digest (" + archway + "), not DockerImage quay.io/evil/builder:1"}},
		{"archway's image by tag", custom("DockerImage", "quay.io/archway/builder:latest", false), archway + ",quay.io/archway/builder:latest",
			[]string{"not DockerImage quay.io/archway/builder:latest"}},
		{"an image stream tag of the same name", custom("ImageStreamTag", archway, false), allowed, []string{"not ImageStreamTag " + archway}},
		{"the Docker socket", custom("DockerImage", archway, true), allowed, []string{"exposeDockerSocket is refused"}},
		{"both", custom("DockerImage", "x", true), allowed, []string{"not DockerImage x", "exposeDockerSocket is refused"}},
		{"the Build replaced through the env", withEnv(custom("DockerImage", archway, false), "PLATFORMS", "BUILD", "SOURCE_DATE_EPOCH", "PULL_SOURCE_DOCKERCFG_PATH_0", "POD_NAME"), allowed,
			[]string{"spec.strategy.customStrategy.env: BUILD, PULL_SOURCE_DOCKERCFG_PATH_0, POD_NAME would replace what OpenShift sets"}},
		{"the registry policy replaced through the env", withEnv(custom("DockerImage", archway, false), "BUILD_SIGNATURE_POLICY_PATH"), allowed, []string{"BUILD_SIGNATURE_POLICY_PATH would replace"}},
		{"archway's own variables", withEnv(custom("DockerImage", archway, false), "PLATFORMS", "PLATFORMS_ALLOWED_TO_FAIL", "DOCKERFILE_PATH", "BUILD_ARG_GO", "BUILD_LOGLEVEL", "SOURCE_DATE_EPOCH",
			"OPENSHIFT_CUSTOM_BUILD_BASE_IMAGE"), allowed, nil},
		{"secrets of the custom pod", withSecret(custom("DockerImage", archway, false)), allowed, []string{"customStrategy.secrets are mounted into the custom builder's pod only"}},
		{"no image configured", custom("DockerImage", archway, false), " quay.io/archway/builder:latest", []string{"none is configured in ConfigMap " + cm}},
		{"type Custom without customStrategy", &openshiftbuildv1.BuildStrategy{Type: customType}, allowed, []string{"not  "}},
		{"a customStrategy under type Docker", &openshiftbuildv1.BuildStrategy{
			Type: openshiftbuildv1.DockerBuildStrategyType, DockerStrategy: &openshiftbuildv1.DockerBuildStrategy{},
			CustomStrategy: &openshiftbuildv1.CustomBuildStrategy{From: corev1.ObjectReference{Kind: "DockerImage", Name: "quay.io/evil/x:1"}},
		}, allowed, []string{"not DockerImage quay.io/evil/x:1"}},
		{"the Docker strategy", &openshiftbuildv1.BuildStrategy{Type: openshiftbuildv1.DockerBuildStrategyType, DockerStrategy: &openshiftbuildv1.DockerBuildStrategy{}}, "", nil},
		{"the Source strategy", &openshiftbuildv1.BuildStrategy{Type: openshiftbuildv1.SourceBuildStrategyType, SourceStrategy: &openshiftbuildv1.SourceBuildStrategy{}}, "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.s, tt.images, cm)
			if len(tt.refuse) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted, want refused with %q", tt.refuse)
			}
			for _, want := range tt.refuse {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refused with %q, want %q in it", err, want)
				}
			}
		})
	}
}

func TestNeedsCheck(t *testing.T) {
	evil := custom("DockerImage", "quay.io/evil/builder:1", false)
	withEnv := custom("DockerImage", "quay.io/evil/builder:1", false)
	withEnv.CustomStrategy.Env = []corev1.EnvVar{{Name: "PLATFORMS", Value: "linux/amd64"}}
	docker := &openshiftbuildv1.BuildStrategy{Type: openshiftbuildv1.DockerBuildStrategyType, DockerStrategy: &openshiftbuildv1.DockerBuildStrategy{}}
	for _, tt := range []struct {
		name   string
		s, old *openshiftbuildv1.BuildStrategy
		want   bool
	}{
		{"a create", evil, nil, true},
		{"an update keeping the strategy", evil, custom("DockerImage", "quay.io/evil/builder:1", false), false},
		{"an update changing the image", evil, custom("DockerImage", archway, false), true},
		{"an update changing the env", withEnv, evil, true},
		{"an update to the Custom strategy", evil, docker, true},
		{"a Docker build", docker, nil, false},
		{"an update to the Docker strategy", docker, evil, false},
	} {
		if got := NeedsCheck(tt.s, tt.old); got != tt.want {
			t.Errorf("%s: NeedsCheck = %v, want %v", tt.name, got, tt.want)
		}
	}
}
