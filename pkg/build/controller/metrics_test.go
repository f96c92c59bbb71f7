package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestMetrics(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := buildv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Unix(1_800_000_000, 0))
	running := makeBuild("a").phase(runningP).obj()
	running.Status.StartTimestamp = &started
	objs := []*buildv1.Build{
		running,
		makeBuild("b").phase(completeP).obj(),
		func() *buildv1.Build {
			b := makeBuild("c").phase(failedP).obj()
			b.Status.Reason = buildv1.StatusReasonPlatformBuildFailed
			return b
		}(),
		makeBuild("d").phase(completeP).obj(),
	}
	c := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range objs {
		c = c.WithObjects(o)
	}
	m := NewMetrics(c.Build())
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP openshift_build_total Builds by phase, reason and strategy (OpenShift's metric of that name).
# TYPE openshift_build_total gauge
openshift_build_total{phase="Complete",reason="",strategy="Docker"} 2
openshift_build_total{phase="Failed",reason="PlatformBuildFailed",strategy="Docker"} 1
openshift_build_total{phase="Running",reason="",strategy="Docker"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "openshift_build_total"); err != nil {
		t.Error(err)
	}
	wantActive := `
# HELP openshift_build_active_time_seconds For each build that has not ended, when it became active (started running, or was created while New or Pending), in seconds since the epoch (OpenShift's metric of that name).
# TYPE openshift_build_active_time_seconds gauge
openshift_build_active_time_seconds{name="a",namespace="ns",phase="Running",strategy="Docker"} 1.8e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantActive), "openshift_build_active_time_seconds"); err != nil {
		t.Error(err)
	}

	t0 := metav1.NewTime(time.Unix(1_800_000_000, 0))
	t1 := metav1.NewTime(t0.Add(90 * time.Second))
	m.observeEnded(buildv1.BuildStatus{Platforms: []buildv1.BuildStatusPlatform{
		{Platform: amd, Phase: completeP, StartTimestamp: &t0, CompletionTimestamp: &t1},
		{Platform: arm, Phase: failedP, StartTimestamp: &t0, CompletionTimestamp: &t1},
		{Platform: ppc, Phase: errorP}, // never started: not observed
	}})
	if n := testutil.CollectAndCount(m.platformDuration); n != 2 {
		t.Errorf("%d platform duration series, want 2", n)
	}
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		t.Errorf("metrics cannot be registered on a second registry: %v", err)
	}
}
