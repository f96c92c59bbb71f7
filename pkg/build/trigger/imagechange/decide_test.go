package imagechange

import (
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func bcWith(from string, df string, triggers ...buildv1.BuildTriggerPolicy) *buildv1.BuildConfig {
	bc := &buildv1.BuildConfig{}
	bc.Spec.Triggers = triggers
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	if from != "" {
		bc.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "DockerImage", Name: from}
	}
	if df != "" {
		bc.Spec.Source.Dockerfile = ptr.To(df)
	}
	return bc
}

var imageChange = buildv1.BuildTriggerPolicy{Type: buildv1.ImageChangeBuildTriggerType, ImageChange: &buildv1.ImageChangeTrigger{}}

func TestWatched(t *testing.T) {
	for _, tc := range []struct {
		name, from, df, want, err string
		strategyFrom              bool
	}{
		{name: "the strategy's from", from: "r.example/base:1", df: "FROM other\n", want: "r.example/base:1", strategyFrom: true},
		{name: "the inline Dockerfile's last stage", df: "FROM golang AS b\nRUN x\nFROM r.example/run:2 AS r\nFROM r\n", want: "r.example/run:2"},
		{name: "a build arg", df: "ARG B\nFROM $B\n", err: "not built on an image written out"},
		{name: "scratch", df: "FROM scratch\n", err: "not built on an image written out"},
		{name: "nothing to watch", err: "no image to watch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Watched(bcWith(tc.from, tc.df, imageChange))
			if len(got) != 1 {
				t.Fatalf("got %d triggers", len(got))
			}
			if tc.err != "" {
				if got[0].Err == nil || !strings.Contains(got[0].Err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", got[0].Err, tc.err)
				}
				return
			}
			if got[0].Err != nil || got[0].Image != tc.want || got[0].StrategyFrom != tc.strategyFrom {
				t.Fatalf("got %+v, want %s (strategy from %v)", got[0], tc.want, tc.strategyFrom)
			}
		})
	}
}

func TestImageID(t *testing.T) {
	d := digest.Digest("sha256:" + strings.Repeat("a", 64))
	for ref, want := range map[string]string{
		"127.0.0.1:5000/team/base:latest": "127.0.0.1:5000/team/base@" + d.String(),
		"busybox":                         "busybox@" + d.String(),
		"r.example/b@sha256:" + strings.Repeat("b", 64): "r.example/b@" + d.String(),
	} {
		if got, err := ImageID(ref, d); err != nil || got != want {
			t.Errorf("ImageID(%s) = %q, %v; want %q", ref, got, err, want)
		}
	}
}

// TestDecide: a new image starts one build pinned to it, with OpenShift's
// cause, and its record goes with the start; a recorded image starts
// nothing; a first observation starts a build unless a ConfigChange
// trigger built the image.
func TestDecide(t *testing.T) {
	now := metav1.Now()
	obs := func(id string) []Observation {
		return []Observation{{Trigger: Trigger{Image: "r.example/base:1", StrategyFrom: true}, ImageID: id}}
	}
	bc := bcWith("r.example/base:1", "", imageChange)

	plan := Decide(bc, obs("r.example/base@sha256:1"), now)
	if plan.Start == nil {
		t.Fatal("first observation: no build")
	}
	c := plan.Start.TriggeredBy
	if len(c) != 1 || c[0].Message != "Image change" || c[0].ImageChangeBuild.ImageID != "r.example/base@sha256:1" ||
		c[0].ImageChangeBuild.FromRef.Name != "r.example/base:1" || c[0].ImageChangeBuild.FromRef.Kind != "DockerImage" {
		t.Errorf("causes %+v", c)
	}
	if plan.Start.From == nil || plan.Start.From.Name != "r.example/base@sha256:1" {
		t.Errorf("from %+v, want the digest", plan.Start.From)
	}
	rec := plan.Start.ImageChangeTriggers
	if len(rec) != 1 || rec[0].LastTriggeredImageID != "r.example/base@sha256:1" || rec[0].From.Name != "r.example/base:1" {
		t.Errorf("record %+v", rec)
	}

	bc.Status.ImageChangeTriggers = rec
	if plan := Decide(bc, obs("r.example/base@sha256:1"), now); plan.Start != nil || plan.Record != nil {
		t.Errorf("unchanged image: %+v", plan)
	}
	if plan := Decide(bc, obs("r.example/base@sha256:2"), now); plan.Start == nil {
		t.Error("new digest: no build")
	}

	withConfigChange := bcWith("r.example/base:1", "", imageChange, buildv1.BuildTriggerPolicy{Type: buildv1.ConfigChangeBuildTriggerType})
	plan = Decide(withConfigChange, obs("r.example/base@sha256:1"), now)
	if plan.Start != nil || len(plan.Record) != 1 {
		t.Errorf("first observation with ConfigChange: %+v, want a record and no build", plan)
	}
}
