package node

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement/execformat"
	"github.com/archway-build/archway/test/bed"
)

// TestExecFormatErrorMonitor turns placement's exec-format-error monitor on
// in the ClusterPodPlacementConfig and runs, on the real node, a pod whose
// linux/amd64 image holds a program for an architecture this machine
// cannot run, beside a pod that fails for another reason with the same
// exit code: the monitor records an ExecFormatError event on the first pod
// only, and counts it under the node's architecture.
func TestExecFormatErrorMonitor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	cppc := &multiarchv1beta1.ClusterPodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName},
		Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{
			Plugins: &multiarchv1beta1.Plugins{ExecFormatErrorMonitor: &multiarchv1beta1.ExecFormatErrorMonitor{Enabled: true}},
		},
	}
	if err := testBed.Client.Create(ctx, cppc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testBed.Client.Delete(context.Background(), cppc) })

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: testBed.Clientset.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	reg := prometheus.NewRegistry()
	m, err := execformat.New(testBed.Clientset, testBed.Client, broadcaster.NewRecorder(testBed.Client.Scheme(), "exec-format-error-monitor"),
		reg, ctrl.Log.WithName("exec-format-error-monitor"))
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Start(mctx)
	}()
	defer func() { stop(); <-done }()

	foreign := foreignArch(t)
	image, err := testBed.PushProgramImage(ctx, "./test/bed/cmd/pause", "tests/mislabelled:"+foreign, foreign, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(ctx, t)
	mislabelled := nodePod(ns, "mislabelled", corev1.Container{Name: "main", Image: image})
	// Exit code 255 too, and no exec format error.
	other := nodePod(ns, "other", corev1.Container{Name: "main", Image: testBed.BaseImage, Command: []string{"sh", "-c", "echo failing; exit 255"}})
	for _, p := range []*corev1.Pod{other, mislabelled} {
		runOnNode(ctx, t, p)
	}
	// The monitor reads pods' changes in order: the other pod's failure
	// is judged before the mislabelled pod's, whose event is the signal
	// that no event about the other pod is coming.
	var ev eventsv1.Event
	for {
		var list eventsv1.EventList
		if err := testBed.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range list.Items {
			if e.Reason != execformat.EventReason {
				continue
			}
			if e.Regarding.Name != mislabelled.Name {
				t.Fatalf("ExecFormatError event about %s: %s", e.Regarding.Name, e.Note)
			}
			ev, found = e, true
		}
		if found {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no ExecFormatError event on the mislabelled pod")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "exec format error") || !strings.Contains(ev.Note, runtime.GOARCH) {
		t.Errorf("event %s %q", ev.Type, ev.Note)
	}
	if got := counter(t, reg, "archway_placement_exec_format_errors_total", runtime.GOARCH); got != 1 {
		t.Errorf("archway_placement_exec_format_errors_total{architecture=%q} = %v, want 1", runtime.GOARCH, got)
	}
}

// counter is the value of a counter with one label in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
