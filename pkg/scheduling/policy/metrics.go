package policy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are created per component and registered with the registerer
// the caller passes (in build-controller, controller-runtime's registry),
// never from package state.

// Results of merging one policy into a pod.
const (
	resultChanged   = "changed"   // the policy added something to the pod
	resultUnchanged = "unchanged" // it selected the pod, which had all of it already
	resultInvalid   = "invalid"   // skipped: it breaks the validation rules
)

// Results of one admission (of a pod, or of a workload's template).
const (
	podMutated   = "mutated"
	podUnchanged = "unchanged"
	podNoPolicy  = "no-policy"
	podError     = "error"
)

type metrics struct {
	mutations *prometheus.CounterVec
	pods      *prometheus.CounterVec
	workloads *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	latency   prometheus.Histogram
	writes    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		mutations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_scheduling_policy_mutations_total",
			Help: "Policies merged into new pods, by policy (Kind/[namespace/]name) and result (changed, unchanged, invalid).",
		}, []string{"policy", "result"}),
		pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_scheduling_policy_pods_total",
			Help: "Pod creations the scheduling-policy webhook admitted, by result (mutated, unchanged, no-policy, error).",
		}, []string{"result"}),
		workloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_scheduling_policy_workloads_total",
			Help: "Workload creates and updates the scheduling-policy webhook admitted, by kind (Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob) and result (mutated, unchanged, no-policy, error; owned, template-unchanged, no-template: left alone).",
		}, []string{"kind", "result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_scheduling_policy_skipped_parts_total",
			Help: "Parts of policies not applied to a new pod or workload template because it, or a policy merged before, already had another value, by policy, kind (Pod or the workload's) and part (nodeName, schedulerName, nodeSelector).",
		}, []string{"policy", "kind", "part"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "archway_scheduling_policy_admission_duration_seconds",
			Help:    "Time the scheduling-policy webhook spent on a pod, from decoding it to the patch.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1},
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_scheduling_policy_status_writes_total",
			Help: "Status writes of policies by the periodic flush, by result (ok, conflict, error); a conflict is retried at the next flush.",
		}, []string{"result"}),
	}
	// Every result from the start, at zero: an alert on increase() sees
	// the first error, which a series born at one would hide.
	for _, r := range []string{podMutated, podUnchanged, podNoPolicy, podError} {
		m.pods.WithLabelValues(r)
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.mutations, m.pods, m.workloads, m.skipped, m.latency, m.writes} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
