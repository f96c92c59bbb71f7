package controller

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/registry"
)

// settings are the registry Settings made of a registries ConfigMap's
// registries.conf, as the watch makes them.
func settings(t *testing.T, conf string) *registries.Settings {
	t.Helper()
	gen, err := registries.Build(registries.Inputs{Conf: conf})
	if err != nil {
		t.Fatal(err)
	}
	s, err := registries.NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const blockedConf = `
[[registry]]
location = "quay.io/team"
blocked = true
[[registry.mirror]]
location = "mirror.example.com/team"
pull-from-mirror = "digest-only"
`

// TestBuildPodsGetTheRegistriesConf: each build pod is handed the
// cluster's registry configuration, one the builder reads back whole.
func TestBuildPodsGetTheRegistriesConf(t *testing.T) {
	conf, err := RegistriesConf(settings(t, blockedConf))
	if err != nil {
		t.Fatal(err)
	}
	pl := PodPlan{Config: testConfig(), Platforms: []string{"linux/amd64"}, RegistriesConf: conf}
	pod, err := pl.BuildPod(makeBuild("app").obj(), "linux/amd64")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == buildv1.RegistriesConfEnv {
			got = e.Value
		}
	}
	parsed, err := registry.ParseConf(got)
	if err != nil {
		t.Fatalf("$%s = %q: %v", buildv1.RegistriesConfEnv, got, err)
	}
	if len(parsed.Registries) != 1 || !parsed.Registries[0].Blocked || len(parsed.Registries[0].Mirrors) != 1 ||
		parsed.Registries[0].Mirrors[0].PullFromMirror != "digest-only" {
		t.Errorf("the pod's registries are %+v, want quay.io/team blocked with its digest mirror", parsed.Registries)
	}
	if none, _ := RegistriesConf(settings(t, "")); none != "" {
		t.Errorf("an empty configuration gives pods %q, want nothing", none)
	}
}

// TestBlockedFailure: a Build whose output or known base is on a blocked
// registry fails before any pod, saying why; a base a mirror serves does
// not.
func TestBlockedFailure(t *testing.T) {
	s := settings(t, blockedConf)
	digest := "@sha256:0123456789012345678901234567890123456789012345678901234567890123"
	for _, tt := range []struct {
		name, output, from string
		reason             buildv1.StatusReason
		message            string
	}{
		{name: "nothing blocked", output: "quay.io/other/app:v1", from: "quay.io/other/base:1"},
		{name: "output on a blocked registry", output: "quay.io/team/app:v1", from: "quay.io/other/base:1",
			reason: buildv1.StatusReasonInvalidOutputReference, message: "spec.output.to: image quay.io/team/app:v1: registry quay.io/team is blocked"},
		{name: "base by tag with digest mirrors only", output: "quay.io/other/app:v1", from: "quay.io/team/base:1",
			reason: buildv1.StatusReasonPullBuilderImageFailed, message: "name the image by digest"},
		{name: "base by digest through its mirror", output: "quay.io/other/app:v1", from: "quay.io/team/base" + digest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := makeBuild("app").obj()
			b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: tt.output}
			b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "DockerImage", Name: tt.from}}
			f, err := BlockedFailure(b, s)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.reason == "" && f != nil:
				t.Errorf("failed with %s: %s", f.Reason, f.Message)
			case tt.reason != "" && (f == nil || f.Reason != tt.reason || !strings.Contains(f.Message, tt.message)):
				t.Errorf("got %+v, want %s saying %q", f, tt.reason, tt.message)
			}
		})
	}
}

// TestBlockedFailureNotAllowed: with OpenShift's allowedRegistries, a
// Build whose output or known base is on any other registry fails before
// any pod, naming the setting.
func TestBlockedFailureNotAllowed(t *testing.T) {
	gen, err := registries.Build(registries.Inputs{ImageConfig: &configv1.Image{Spec: configv1.ImageSpec{
		RegistrySources: configv1.RegistrySources{AllowedRegistries: []string{"quay.io/team"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := registries.NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, output, from string
		reason             buildv1.StatusReason
	}{
		{name: "both allowed", output: "quay.io/team/app:v1", from: "quay.io/team/base:1"},
		{name: "output not allowed", output: "ghcr.io/team/app:v1", from: "quay.io/team/base:1", reason: buildv1.StatusReasonInvalidOutputReference},
		{name: "base not allowed", output: "quay.io/team/app:v1", from: "docker.io/library/busybox:1", reason: buildv1.StatusReasonPullBuilderImageFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := makeBuild("app").obj()
			b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: tt.output}
			b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "DockerImage", Name: tt.from}}
			f, err := BlockedFailure(b, s)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.reason == "" && f != nil:
				t.Errorf("failed with %s: %s", f.Reason, f.Message)
			case tt.reason != "" && (f == nil || f.Reason != tt.reason || !strings.Contains(f.Message, "allowedRegistries")):
				t.Errorf("got %+v, want %s naming allowedRegistries", f, tt.reason)
			}
		})
	}
}
