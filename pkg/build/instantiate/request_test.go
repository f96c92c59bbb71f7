package instantiate

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func testBC() *buildv1.BuildConfig {
	return &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team", UID: "uid-1", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"build.openshift.io/emulation": "linux/riscv64", "example.com/other": "x"}},
		Spec: buildv1.BuildConfigSpec{
			RunPolicy: buildv1.BuildRunPolicySerialLatestOnly,
			CommonSpec: buildv1.CommonSpec{
				Source:                 buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://example.com/app.git", Ref: "main"}},
				Strategy:               buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}}},
				Platforms:              []string{"linux/amd64", "linux/s390x"},
				PlatformsAllowedToFail: []string{"linux/s390x"},
			},
		},
	}
}

func TestNewBuild(t *testing.T) {
	rev := &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: "abc", Message: "fix"}}
	cause := []buildv1.BuildTriggerCause{{Message: CauseManual}}
	cases := []struct {
		name  string
		req   Request
		check func(t *testing.T, b *buildv1.Build)
	}{
		{"identity: name, labels, annotations, owner, phase", Request{TriggeredBy: cause}, func(t *testing.T, b *buildv1.Build) {
			if b.Name != "app-7" || b.Namespace != "team" {
				t.Errorf("name %s/%s", b.Namespace, b.Name)
			}
			wantLabels := map[string]string{"team": "a", "openshift.io/build-config.name": "app", "buildconfig": "app", "openshift.io/build.start-policy": "SerialLatestOnly"}
			if !reflect.DeepEqual(b.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", b.Labels, wantLabels)
			}
			wantAnn := map[string]string{"openshift.io/build-config.name": "app", "openshift.io/build.number": "7", "build.openshift.io/emulation": "linux/riscv64"}
			if !reflect.DeepEqual(b.Annotations, wantAnn) {
				t.Errorf("annotations %v, want %v", b.Annotations, wantAnn)
			}
			if o := b.OwnerReferences; len(o) != 1 || o[0].Kind != "BuildConfig" || o[0].UID != "uid-1" || !ptr.Deref(o[0].Controller, false) {
				t.Errorf("owners %+v", o)
			}
			if b.Status.Phase != buildv1.BuildPhaseNew || !reflect.DeepEqual(b.Spec.TriggeredBy, cause) {
				t.Errorf("phase %q, triggeredBy %+v", b.Status.Phase, b.Spec.TriggeredBy)
			}
			if !reflect.DeepEqual(b.Spec.Platforms, []string{"linux/amd64", "linux/s390x"}) || !reflect.DeepEqual(b.Spec.PlatformsAllowedToFail, []string{"linux/s390x"}) {
				t.Errorf("platforms %v / %v", b.Spec.Platforms, b.Spec.PlatformsAllowedToFail)
			}
		}},
		{"revision", Request{Revision: rev}, func(t *testing.T, b *buildv1.Build) {
			if !reflect.DeepEqual(b.Spec.Revision, rev) || b.Spec.Revision == rev {
				t.Errorf("revision %+v (must be a copy)", b.Spec.Revision)
			}
		}},
		{"env replaces by name and appends", Request{Env: []corev1.EnvVar{{Name: "B", Value: "x"}, {Name: "C", Value: "3"}}}, func(t *testing.T, b *buildv1.Build) {
			want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x"}, {Name: "C", Value: "3"}}
			if got := b.Spec.Strategy.DockerStrategy.Env; !reflect.DeepEqual(got, want) {
				t.Errorf("env %v, want %v", got, want)
			}
		}},
		{"platforms override drops the old allowed-to-fail list", Request{Platforms: []string{"linux/arm64"}}, func(t *testing.T, b *buildv1.Build) {
			if !reflect.DeepEqual(b.Spec.Platforms, []string{"linux/arm64"}) || b.Spec.PlatformsAllowedToFail != nil {
				t.Errorf("platforms %v / %v", b.Spec.Platforms, b.Spec.PlatformsAllowedToFail)
			}
		}},
		{"both lists overridden", Request{Platforms: []string{"linux/arm64", "linux/ppc64le"}, PlatformsAllowedToFail: []string{"linux/ppc64le"}}, func(t *testing.T, b *buildv1.Build) {
			if !reflect.DeepEqual(b.Spec.PlatformsAllowedToFail, []string{"linux/ppc64le"}) {
				t.Errorf("allowed %v", b.Spec.PlatformsAllowedToFail)
			}
		}},
		{"from replaces the base image", Request{From: &corev1.ObjectReference{Kind: "DockerImage", Name: "base:2"}}, func(t *testing.T, b *buildv1.Build) {
			if f := b.Spec.Strategy.DockerStrategy.From; f == nil || f.Name != "base:2" {
				t.Errorf("from %+v", f)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bc := testBC()
			before := bc.DeepCopy()
			b := NewBuild(bc, 7, tc.req)
			tc.check(t, b)
			if !reflect.DeepEqual(bc, before) {
				t.Error("NewBuild changed the BuildConfig")
			}
		})
	}
}

func TestNewBuildStrategyWithoutOptions(t *testing.T) {
	bc := testBC()
	bc.Spec.Strategy.DockerStrategy = nil
	bc.Spec.RunPolicy = ""
	b := NewBuild(bc, 1, Request{Env: []corev1.EnvVar{{Name: "A", Value: "1"}}})
	if s := b.Spec.Strategy.DockerStrategy; s == nil || len(s.Env) != 1 {
		t.Errorf("dockerStrategy %+v", s)
	}
	if b.Labels[buildv1.BuildRunPolicyLabel] != "Serial" {
		t.Errorf("run policy label %q, want the default Serial", b.Labels[buildv1.BuildRunPolicyLabel])
	}
}

func TestNewBuildDockerOptions(t *testing.T) {
	bc := testBC()
	bc.Spec.Strategy.DockerStrategy.BuildArgs = []corev1.EnvVar{{Name: "GO", Value: "1.25"}, {Name: "CGO", Value: "0"}}
	b := NewBuild(bc, 1, Request{BuildArgs: []corev1.EnvVar{{Name: "GO", Value: "1.26"}, {Name: "TAGS", Value: "x"}}, NoCache: ptr.To(true)})
	s := b.Spec.Strategy.DockerStrategy
	want := []corev1.EnvVar{{Name: "GO", Value: "1.26"}, {Name: "CGO", Value: "0"}, {Name: "TAGS", Value: "x"}}
	if !reflect.DeepEqual(s.BuildArgs, want) || !s.NoCache {
		t.Errorf("buildArgs %v, noCache %v; want %v, true", s.BuildArgs, s.NoCache, want)
	}
	if bc.Spec.Strategy.DockerStrategy.BuildArgs[0].Value != "1.25" {
		t.Error("the BuildConfig's build args were changed")
	}
	bc.Spec.Strategy.DockerStrategy.NoCache = true
	if b := NewBuild(bc, 2, Request{NoCache: ptr.To(false)}); b.Spec.Strategy.DockerStrategy.NoCache {
		t.Error("--no-cache=false left noCache set")
	}
	if b := NewBuild(bc, 3, Request{}); !b.Spec.Strategy.DockerStrategy.NoCache {
		t.Error("no NoCache in the request changed the BuildConfig's noCache")
	}

	bc.Spec.Strategy.DockerStrategy = nil
	if b := NewBuild(bc, 4, Request{NoCache: ptr.To(true)}); b.Spec.Strategy.DockerStrategy == nil || !b.Spec.Strategy.DockerStrategy.NoCache {
		t.Errorf("a Docker strategy without options: %+v", b.Spec.Strategy)
	}
	source := buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{}}
	for _, req := range []Request{{BuildArgs: want}, {NoCache: ptr.To(false)}} {
		if err := CheckStrategyOptions(source, req); err == nil || !strings.Contains(err.Error(), "strategy is Source") {
			t.Errorf("Source strategy, %+v: %v", req, err)
		}
		if err := CheckStrategyOptions(buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType}, req); err != nil {
			t.Errorf("Docker strategy: %v", err)
		}
	}
	if err := CheckStrategyOptions(source, Request{Env: want}); err != nil {
		t.Errorf("env on a Source strategy: %v", err)
	}
	if err := CheckStrategyOptions(source, Request{Incremental: ptr.To(true)}); err != nil {
		t.Errorf("incremental on a Source strategy: %v", err)
	}
	if err := CheckStrategyOptions(buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType}, Request{Incremental: ptr.To(true)}); err == nil ||
		!strings.Contains(err.Error(), "incremental is an option of the Source strategy") {
		t.Errorf("incremental on a Docker strategy: %v", err)
	}
	sbc := &buildv1.BuildConfig{}
	sbc.Spec.Strategy = source
	sbc.Spec.Strategy.SourceStrategy.Incremental = ptr.To(true)
	if b := NewBuild(sbc, 1, Request{Incremental: ptr.To(false)}); *b.Spec.Strategy.SourceStrategy.Incremental {
		t.Error("--incremental=false left incremental set")
	}
	if !*sbc.Spec.Strategy.SourceStrategy.Incremental {
		t.Error("the request changed the BuildConfig")
	}
}

func TestNewClone(t *testing.T) {
	bc := testBC()
	src := NewBuild(testBC(), 3, Request{Platforms: []string{"linux/arm64"}, Revision: &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: "c0ffee"}}})
	src.Annotations[buildv1.EmulationAnnotation] = buildv1.EmulationNever
	src.Spec.Source.Git.Ref = "v1"
	// The BuildConfig moved on since src started.
	bc.Spec.Source.Git.Ref = "release"
	bc.Spec.Platforms = []string{"linux/amd64", "linux/ppc64le"}
	bc.Status.LastVersion = 5

	b := NewClone(bc, src, 6, Request{TriggeredBy: []buildv1.BuildTriggerCause{{Message: CauseManual}}, Env: []corev1.EnvVar{{Name: "A", Value: "9"}}})
	if b.Name != "app-6" || b.Annotations[buildv1.BuildNumberAnnotation] != "6" || b.Annotations[buildv1.BuildConfigAnnotation] != "app" {
		t.Errorf("name %s, annotations %v", b.Name, b.Annotations)
	}
	if b.Annotations[buildv1.EmulationAnnotation] != buildv1.EmulationNever {
		t.Errorf("emulation %q, want the source build's", b.Annotations[buildv1.EmulationAnnotation])
	}
	if !reflect.DeepEqual(b.Spec.Platforms, []string{"linux/arm64"}) || b.Spec.Revision.Git.Commit != "c0ffee" ||
		b.Spec.Source.Git.Ref != "v1" {
		t.Errorf("spec is not the source build's: platforms %v, revision %+v, source %+v", b.Spec.Platforms, b.Spec.Revision, b.Spec.Source)
	}
	if got := b.Spec.Strategy.DockerStrategy.Env; len(got) != 2 || got[0].Value != "9" {
		t.Errorf("env %v: the request's A=9 replaces the source build's", got)
	}
	if o := b.OwnerReferences; len(o) != 1 || o[0].UID != "uid-1" {
		t.Errorf("owners %+v", o)
	}
	if src.Spec.Strategy.DockerStrategy.Env[0].Value != "1" {
		t.Error("the source build was changed")
	}
	delete(src.Annotations, buildv1.EmulationAnnotation)
	if b := NewClone(bc, src, 7, Request{}); b.Annotations[buildv1.EmulationAnnotation] != "" {
		t.Errorf("emulation %q: the source build had none", b.Annotations[buildv1.EmulationAnnotation])
	}
}
