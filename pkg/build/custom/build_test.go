package custom

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// openshiftBuild is BUILD as OpenShift's controller encodes a Custom-strategy
// Build (the output already resolved to a DockerImage, the push secret
// chosen from the builder account).
const openshiftBuild = `{"kind":"Build","apiVersion":"build.openshift.io/v1",
"metadata":{"name":"hello-2","namespace":"team","uid":"u-1","annotations":{"openshift.io/build-config.name":"hello"}},
"spec":{"serviceAccount":"builder",
 "source":{"type":"Dockerfile","dockerfile":"FROM busybox\n"},
 "strategy":{"type":"Custom","customStrategy":{
   "from":{"kind":"DockerImage","name":"quay.io/archway/builder@sha256:aa"},
   "pullSecret":{"name":"builder-dockercfg-x"},
   "forcePull":true,
   "env":[{"name":"PLATFORMS","value":"linux/amd64, linux/arm64,,"},
          {"name":"PLATFORMS_ALLOWED_TO_FAIL","value":"linux/arm64"},
          {"name":"DOCKERFILE_PATH","value":"Containerfile"},
          {"name":"BUILD_ARG_VERSION","value":"1.2"},
          {"name":"OPENSHIFT_CUSTOM_BUILD_BASE_IMAGE","value":"quay.io/archway/builder@sha256:aa"},
          {"name":"GREETING","value":"hi"}]}},
 "output":{"to":{"kind":"DockerImage","name":"image-registry.openshift-image-registry.svc:5000/team/hello:latest"},
           "pushSecret":{"name":"builder-dockercfg-x"}}},
"status":{"phase":"Pending","outputDockerImageReference":"image-registry.openshift-image-registry.svc:5000/team/hello:latest"}}`

func TestDockerBuild(t *testing.T) {
	ob, s, err := ParseBuild([]byte(openshiftBuild))
	if err != nil {
		t.Fatal(err)
	}
	b, err := DockerBuild(ob, s, "linux/s390x")
	if err != nil {
		t.Fatal(err)
	}
	want := &buildv1.DockerBuildStrategy{
		PullSecret:     &corev1.LocalObjectReference{Name: "builder-dockercfg-x"},
		ForcePull:      true,
		DockerfilePath: "Containerfile",
		BuildArgs:      []corev1.EnvVar{{Name: "VERSION", Value: "1.2"}},
		Env:            []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
	}
	if d := cmp.Diff(want, b.Spec.Strategy.DockerStrategy); d != "" {
		t.Errorf("docker strategy (-want +got):\n%s", d)
	}
	if b.Spec.Strategy.Type != buildv1.DockerBuildStrategyType || b.Spec.Strategy.CustomStrategy != nil {
		t.Errorf("strategy = %+v, want Docker only", b.Spec.Strategy)
	}
	if d := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, b.Spec.Platforms); d != "" {
		t.Errorf("platforms: PLATFORMS must win over the annotation's (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"linux/arm64"}, b.Spec.PlatformsAllowedToFail); d != "" {
		t.Errorf("allowed to fail (-want +got):\n%s", d)
	}
	if b.UID != "u-1" || b.Name != "hello-2" || b.Spec.Output.PushSecret.Name != "builder-dockercfg-x" || b.Status.Phase != "" {
		t.Errorf("metadata, output or status not as OpenShift's Build: %+v", b)
	}
}

func TestDockerBuildPlatformsFromAnnotation(t *testing.T) {
	ob, s, err := ParseBuild([]byte(openshiftBuild))
	if err != nil {
		t.Fatal(err)
	}
	s.Env = nil
	b, err := DockerBuild(ob, s, "linux/s390x,linux/ppc64le")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"linux/s390x", "linux/ppc64le"}, b.Spec.Platforms); d != "" {
		t.Errorf("platforms (-want +got):\n%s", d)
	}
}

func TestDockerBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Strategy)
		want   string
	}{
		{"docker socket", func(s *Strategy) { s.ExposeDockerSocket = true }, "exposeDockerSocket is refused"},
		{"strategy secrets", func(s *Strategy) { s.Secrets = append(s.Secrets, []byte(`{}`)) }, "use source.secrets"},
		{"allowed to fail alone", func(s *Strategy) {
			s.Env = []corev1.EnvVar{{Name: PlatformsAllowedToFailEnv, Value: "linux/arm64"}}
		}, "without PLATFORMS"},
		{"build arg without a name", func(s *Strategy) { s.Env = []corev1.EnvVar{{Name: BuildArgEnvPrefix}} }, "names no build argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob, s, err := ParseBuild([]byte(openshiftBuild))
			if err != nil {
				t.Fatal(err)
			}
			tc.change(s)
			if _, err := DockerBuild(ob, s, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseBuildRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "is empty"},
		{`{"spec":{"strategy":{"type":"Docker","dockerStrategy":{}}}}`, `strategy "Docker"`},
		{`{`, "reading $BUILD"},
	} {
		if _, _, err := ParseBuild([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseBuild(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}
