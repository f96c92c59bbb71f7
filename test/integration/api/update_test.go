package api

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

const specImmutable = "spec: Invalid value: spec is immutable once the Build exists; only spec.revision may be set (once) and spec.output.pushSecret may change"

// TestBuildSpecIsImmutable updates a Build's spec field by field: every
// change is rejected except those OpenShift allows (setting spec.revision
// once, as builds/details does, and changing output.pushSecret).
func TestBuildSpecIsImmutable(t *testing.T) {
	ns := newNamespace(t)
	revision := &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: "0123abcd", Message: "Fix it"}}
	cases := []struct {
		name   string
		before func(*buildv1.BuildSpec) // applied before creation
		change func(*buildv1.BuildSpec)
		want   []string
	}{
		{name: "set revision once", change: func(s *buildv1.BuildSpec) { s.Revision = revision }},
		{name: "change push secret", change: func(s *buildv1.BuildSpec) { s.Output.PushSecret = &corev1.LocalObjectReference{Name: "other"} }},
		{
			name:   "change revision",
			before: func(s *buildv1.BuildSpec) { s.Revision = revision },
			change: func(s *buildv1.BuildSpec) { s.Revision.Git.Commit = "4567ef" },
			want:   []string{specImmutable},
		},
		{
			name:   "remove revision",
			before: func(s *buildv1.BuildSpec) { s.Revision = revision },
			change: func(s *buildv1.BuildSpec) { s.Revision = nil },
			want:   []string{specImmutable},
		},
		{name: "add platform", change: func(s *buildv1.BuildSpec) { s.Platforms = append(s.Platforms, "linux/s390x") }, want: []string{specImmutable}},
		{name: "remove platforms", change: func(s *buildv1.BuildSpec) { s.Platforms = nil }, want: []string{specImmutable}},
		{name: "allow a platform to fail", change: func(s *buildv1.BuildSpec) { s.PlatformsAllowedToFail = []string{"linux/arm64"} }, want: []string{specImmutable}},
		{name: "service account", change: func(s *buildv1.BuildSpec) { s.ServiceAccount = "other" }, want: []string{specImmutable}},
		{name: "source", change: func(s *buildv1.BuildSpec) { s.Source.ContextDir = "sub" }, want: []string{specImmutable}},
		{name: "strategy", change: func(s *buildv1.BuildSpec) { s.Strategy.DockerStrategy.NoCache = true }, want: []string{specImmutable}},
		{name: "output", change: func(s *buildv1.BuildSpec) { s.Output.To.Name = "registry.example.com/team/app:v2" }, want: []string{specImmutable}},
		{name: "image labels", change: func(s *buildv1.BuildSpec) { s.Output.ImageLabels = []buildv1.ImageLabel{{Name: "a"}} }, want: []string{specImmutable}},
		{name: "post commit", change: func(s *buildv1.BuildSpec) { s.PostCommit.Script = "make test" }, want: []string{specImmutable}},
		{name: "deadline", change: func(s *buildv1.BuildSpec) { s.CompletionDeadlineSeconds = ptr.To(int64(60)) }, want: []string{specImmutable}},
		{name: "node selector", change: func(s *buildv1.BuildSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }, want: []string{specImmutable}},
		{name: "trusted CA", change: func(s *buildv1.BuildSpec) { s.MountTrustedCA = ptr.To(false) }, want: []string{specImmutable}},
		{name: "triggered by", change: func(s *buildv1.BuildSpec) {
			s.TriggeredBy = []buildv1.BuildTriggerCause{{Message: "Manually triggered"}}
		}, want: []string{specImmutable}},
		{
			name: "resources",
			change: func(s *buildv1.BuildSpec) {
				s.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resourceMustParse("1Gi")}
			},
			want: []string{specImmutable},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			build := typedBuild(ns, "")
			build.GenerateName = "immutable-"
			if tc.before != nil {
				tc.before(&build.Spec)
			}
			g.Expect(b.Client.Create(ctx, build)).To(Succeed())
			tc.change(&build.Spec)
			err := b.Client.Update(ctx, build)
			g.Expect(fieldErrors(err)).To(ConsistOf(tc.want))
		})
	}
}

// TestBuildConfigSpecIsMutable: a BuildConfig is a template, edited in place.
func TestBuildConfigSpecIsMutable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bc := &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       buildv1.BuildConfigSpec{CommonSpec: typedBuild(ns, "x").Spec.CommonSpec},
	}
	g.Expect(b.Client.Create(ctx, bc)).To(Succeed())
	bc.Spec.Platforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le"}
	bc.Spec.PlatformsAllowedToFail = []string{"linux/ppc64le"}
	bc.Spec.Output.To.Name = "registry.example.com/team/app:v2"
	bc.Spec.RunPolicy = buildv1.BuildRunPolicyParallel
	g.Expect(b.Client.Update(ctx, bc)).To(Succeed())
	g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(bc), bc)).To(Succeed())
	g.Expect(bc.Spec.Platforms).To(Equal([]string{"linux/amd64", "linux/arm64", "linux/ppc64le"}))
	g.Expect(bc.Spec.RunPolicy).To(Equal(buildv1.BuildRunPolicyParallel))

	// The platform rules hold on updates too.
	bc.Spec.PlatformsAllowedToFail = []string{"linux/s390x"}
	g.Expect(fieldErrors(b.Client.Update(ctx, bc))).To(ConsistOf(
		`spec.platformsAllowedToFail: Invalid value: "linux/s390x" is not in platforms; platformsAllowedToFail must be a subset of platforms`))
}

// TestTerminalPhaseIsFinal: as in OpenShift, a build that is Complete,
// Failed, Error or Cancelled stays so; other phases move freely.
func TestTerminalPhaseIsFinal(t *testing.T) {
	for _, terminal := range []buildv1.BuildPhase{buildv1.BuildPhaseComplete, buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled} {
		t.Run(string(terminal), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			build := typedBuild(newNamespace(t), "phases")
			g.Expect(b.Client.Create(ctx, build)).To(Succeed())
			for _, p := range []buildv1.BuildPhase{buildv1.BuildPhasePending, buildv1.BuildPhaseRunning, terminal} {
				build.Status.Phase = p
				g.Expect(b.Client.Status().Update(ctx, build)).To(Succeed(), "to %s", p)
			}
			build.Status.Phase = buildv1.BuildPhaseRunning
			g.Expect(fieldErrors(b.Client.Status().Update(ctx, build))).To(ConsistOf(
				`status.phase: Invalid value: "Running": phase cannot change once it is ` + string(terminal)))

			// Other status fields still change (the controller records
			// durations and messages after the fact).
			build.Status.Phase = terminal
			build.Status.DurationSummary = "1m2s"
			g.Expect(b.Client.Status().Update(ctx, build)).To(Succeed())
		})
	}
}
