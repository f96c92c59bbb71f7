package custom

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
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

func TestPlatformsFrom(t *testing.T) {
	_, s, err := ParseBuild([]byte(openshiftBuild))
	if err != nil {
		t.Fatal(err)
	}
	withEnv := s.Env
	for _, tc := range []struct {
		name     string
		env      bool
		defaults string
		want     string
	}{
		{"the strategy's PLATFORMS", true, "linux/s390x", "customStrategy.env PLATFORMS"},
		{"the annotation", false, "linux/s390x", "the build.archway.dev/platforms annotation"},
		{"neither", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Env = nil
			if tc.env {
				s.Env = withEnv
			}
			if got := PlatformsFrom(s, tc.defaults); got != tc.want {
				t.Errorf("PlatformsFrom = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDockerBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*buildv1.Build, *Strategy)
		want   string
	}{
		{"docker socket", func(_ *buildv1.Build, s *Strategy) { s.ExposeDockerSocket = true }, "exposeDockerSocket is refused"},
		{"strategy secrets", func(_ *buildv1.Build, s *Strategy) { s.Secrets = append(s.Secrets, []byte(`{}`)) }, "use source.secrets"},
		{"allowed to fail alone", func(_ *buildv1.Build, s *Strategy) {
			s.Env = []corev1.EnvVar{{Name: PlatformsAllowedToFailEnv, Value: "linux/arm64"}}
		}, "without PLATFORMS"},
		{"build arg without a name", func(_ *buildv1.Build, s *Strategy) { s.Env = []corev1.EnvVar{{Name: BuildArgEnvPrefix}} }, "names no build argument"},
		{"image source", func(b *buildv1.Build, _ *Strategy) {
			b.Spec.Source.Images = []kruntime.RawExtension{{Raw: []byte(`{"from":{"kind":"DockerImage","name":"busybox"}}`)}}
		}, "source.images is refused"},
		{"binary source", func(b *buildv1.Build, _ *Strategy) {
			b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}}
		}, "source.binary is refused"},
		{"an image stream output", func(b *buildv1.Build, _ *Strategy) {
			b.Spec.Output.To = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "hello:latest"}
		}, "output.to of kind ImageStreamTag is refused"},
		{"another API version", func(_ *buildv1.Build, s *Strategy) { s.BuildAPIVersion = "build.openshift.io/v2" }, "customStrategy.buildAPIVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob, s, err := ParseBuild([]byte(openshiftBuild))
			if err != nil {
				t.Fatal(err)
			}
			tc.change(ob, s)
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
		// Fields this release does not know, in the spec and in the
		// custom strategy, are named; the status is not read.
		{strings.Replace(openshiftBuild, `"serviceAccount":"builder",`, `"serviceAccount":"builder","futureField":1,`, 1), `unknown field "futureField"`},
		{strings.Replace(openshiftBuild, `"forcePull":true,`, `"forcePull":true,"sidecars":[],`, 1), `unknown field "strategy.customStrategy.sidecars"`},
		{strings.Replace(openshiftBuild, `"source":{"type":"Dockerfile",`, `"source":{"type":"Dockerfile","git":{"uri":"x","lfs":true},`, 1), `unknown field "source.git.lfs"`},
	} {
		if _, _, err := ParseBuild([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseBuild(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParseBuildReadsTheStatusLoosely(t *testing.T) {
	in := strings.Replace(openshiftBuild, `"status":{"phase":"Pending",`, `"status":{"phase":"Pending","logSnippet":"x","stages":[],`, 1)
	if _, _, err := ParseBuild([]byte(in)); err != nil {
		t.Errorf("ParseBuild with OpenShift's status fields: %v", err)
	}
}

func TestCheckTrustedCA(t *testing.T) {
	ca := &configv1alpha1.TrustedCAConfig{ConfigMapName: "trusted-ca", Key: "ca-bundle.crt"}
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trusted-ca", Namespace: "team"}, Data: map[string]string{"ca-bundle.crt": "PEM"}}
	for _, tc := range []struct {
		name  string
		mount *bool
		ca    *configv1alpha1.TrustedCAConfig
		objs  []kruntime.Object
		want  string // "": accepted
	}{
		{"not asked", nil, nil, nil, ""},
		{"no bundle configured", ptr.To(true), nil, nil, "names no trusted CA bundle"},
		{"configured, no ConfigMap", ptr.To(true), ca, nil, `"trusted-ca" (build.trustedCA) does not exist`},
		{"configured and there", ptr.To(true), ca, []kruntime.Object{bundle}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team"}}
			b.Spec.MountTrustedCA = tc.mount
			err := CheckTrustedCA(context.Background(), fake.NewClientset(tc.objs...), b, &configv1alpha1.BuildControllerConfig{TrustedCA: tc.ca})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
