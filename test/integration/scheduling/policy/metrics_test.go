package policy

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// TestMetrics reads the scheduling-policy webhook's metrics as Prometheus
// scrapes them (the text format, over HTTP) before and after a known set
// of admissions, and checks each moved by what happened: a pod the policy
// changed with a part skipped, a pod no policy selects, a Deployment whose
// template the policy changed with a part skipped, and the status write
// that counted the pod.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(promhttp.HandlerFor(metricsRegistry, promhttp.HandlerOpts{}))
	defer srv.Close()
	ns := newNamespace(t, nil)
	p := nsPolicy(ns, "metered", 0, matchLabels("app", "web"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"disk": "ssd", "pool": "web"}, SchedulerName: noScheduler,
	})
	createPolicy(t, p)
	ref := "PodSchedulingPolicy/" + ns + "/metered"
	before := scrape(t, srv.URL)

	pod := createPod(t, makePod(ns, "web").label("app", "web").nodeSelector("disk", "hdd").obj())
	createPod(t, makePod(ns, "other").label("app", "other").obj())
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: webTemplate(),
	}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Positive signals that everything counted is counted: the skips'
	// events (recorded after their metrics), and the status write of the
	// pod's count.
	waitSkippedEvent(t, ns, "Pod", pod.Name)
	waitSkippedEvent(t, ns, "Deployment", d.Name)
	counted := &kupidv1alpha1.PodSchedulingPolicy{}
	if err := bed.WaitFor(ctx, k8s, client.ObjectKeyFromObject(p), counted, func(o *kupidv1alpha1.PodSchedulingPolicy) bool {
		return o.Status.MatchedPods == 1
	}); err != nil {
		t.Fatalf("the policy's status never counted the pod: %v", err)
	}
	after := scrape(t, srv.URL)
	delta := func(series string) float64 { return after[series] - before[series] }

	for series, want := range map[string]float64{
		`archway_scheduling_policy_mutations_total{policy="` + ref + `",result="changed"}`:                          1,
		`archway_scheduling_policy_skipped_parts_total{kind="Pod",part="nodeSelector",policy="` + ref + `"}`:        1,
		`archway_scheduling_policy_skipped_parts_total{kind="Deployment",part="nodeSelector",policy="` + ref + `"}`: 1,
		`archway_scheduling_policy_skipped_parts_total{kind="Pod",part="schedulerName",policy="` + ref + `"}`:       0,
		`archway_scheduling_policy_mutations_total{policy="` + ref + `",result="unchanged"}`:                        0,
	} {
		if got := after[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// Counters over every namespace: other tests' pods may add to them
	// (none run at the same time, but kube-controller-manager may still
	// be making their pods), never take away.
	for series, least := range map[string]float64{
		`archway_scheduling_policy_pods_total{result="mutated"}`:                        1,
		`archway_scheduling_policy_pods_total{result="no-policy"}`:                      1,
		`archway_scheduling_policy_workloads_total{kind="Deployment",result="mutated"}`: 1,
		`archway_scheduling_policy_admission_duration_seconds_count`:                    2,
		`archway_scheduling_policy_status_writes_total{result="ok"}`:                    1,
	} {
		if got := delta(series); got < least {
			t.Errorf("%s went up by %v, want at least %v", series, got, least)
		}
	}
	if t.Failed() {
		var names []string
		for k := range after {
			if strings.HasPrefix(k, "archway_scheduling_policy_") {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		t.Logf("series read:\n%s", strings.Join(names, "\n"))
	}
}

// scrape GETs the metrics in Prometheus' text format and returns every
// counter and histogram count by series: `name{label="value",...}` with
// the labels sorted, histograms as name_count.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	counts, err := bed.Scrape(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}
