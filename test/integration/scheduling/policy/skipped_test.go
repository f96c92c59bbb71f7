package policy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
)

// TestPolicyNodeNameOnGatedPod: a policy's nodeName pins a pod that
// placement gates (which may not have spec.nodeName) by a required term on
// the node's name; placement appends its architecture requirement to that
// term, and the scheduler binds the pod to the node once the gate goes. A
// second policy naming another node is skipped, and that is recorded: the
// pod's annotation, an event on the pod (named by the apiserver from
// generateName) related to the policy, and the policy's status.
func TestPolicyNodeNameOnGatedPod(t *testing.T) {
	ctx := context.Background()
	ns := startPlacement(t, "scheduling-policy-suite/node-name")
	createPolicy(t, nsPolicy(ns, "pin", 10, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{NodeName: "node-arm64-1"}))
	other := nsPolicy(ns, "elsewhere", 0, &metav1.LabelSelector{}, kupidv1alpha1.SchedulingCriteria{NodeName: "node-s390x-1"})
	createPolicy(t, other)
	waitGating(t, ns)

	pod := makePod(ns, "").image(testBed.BaseImage).obj()
	pod.GenerateName = "pinned-"
	stored := createPod(t, pod)
	if !slices.ContainsFunc(stored.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }) {
		t.Fatalf("the pod was not gated by placement: %+v", stored.Spec.SchedulingGates)
	}
	pin := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-arm64-1"}}
	if stored.Spec.NodeName != "" || stored.Spec.Affinity == nil || stored.Spec.Affinity.NodeAffinity == nil ||
		!cmp.Equal(stored.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{pin}}}}) {
		t.Fatalf("at admission: nodeName %q, affinity %+v; want the one required term metadata.name In [node-arm64-1]", stored.Spec.NodeName, stored.Spec.Affinity)
	}
	wantSkipped := "PodSchedulingPolicy/" + ns + "/elsewhere: nodeName"
	if got := stored.Annotations[policy.SkippedAnnotation]; got != wantSkipped {
		t.Errorf("%s = %q, want %q", policy.SkippedAnnotation, got, wantSkipped)
	}

	node, err := testBed.WaitPodBound(ctx, ns, stored.Name)
	if err != nil {
		t.Fatal(err)
	}
	if node != "node-arm64-1" {
		t.Errorf("pod bound to %s, want node-arm64-1, the policy's", node)
	}
	released := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), released); err != nil {
		t.Fatal(err)
	}
	terms := released.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || !cmp.Equal(terms[0].MatchFields, []corev1.NodeSelectorRequirement{pin}) ||
		!slices.ContainsFunc(terms[0].MatchExpressions, func(r corev1.NodeSelectorRequirement) bool { return r.Key == corev1.LabelArchStable }) {
		t.Errorf("after placement, terms = %+v; want the node's name and placement's %s requirement in one term", terms, corev1.LabelArchStable)
	}

	ev := waitSkippedEvent(t, ns, "Pod", stored.Name)
	if ev.Regarding.UID != stored.UID {
		t.Errorf("event regards UID %q, want the pod's %q (kubectl describe lists events by it)", ev.Regarding.UID, stored.UID)
	}
	if ev.Related == nil || ev.Related.Kind != policy.KindPodSchedulingPolicy || ev.Related.Name != "elsewhere" || ev.Related.UID != other.UID {
		t.Errorf("event related to %+v, want the policy elsewhere", ev.Related)
	}
	if !strings.Contains(ev.Note, "nodeName") || ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %s %q does not name the part nodeName", ev.Type, ev.Note)
	}
	got := waitSkippedStatus(t, other, stored.Name)
	if s := got.Status.LastSkipped; s.Kind != "Pod" || s.Namespace != ns || !cmp.Equal(s.Parts, []string{"nodeName"}) || s.Time.IsZero() {
		t.Errorf("status.lastSkipped = %+v, want the pod and nodeName", s)
	}
	if got.Status.SkippedPods != 1 {
		t.Errorf("status.skippedPods = %d, want 1", got.Status.SkippedPods)
	}
}

// TestSkippedPartsRecorded: the parts of a policy a pod or a workload's
// template keeps its own values for are recorded on each, with an event,
// and in the policy's status; a dry run records nothing, and a pod that
// claims skipped parts in its own annotation gets none recorded it does
// not have.
func TestSkippedPartsRecorded(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	p := nsPolicy(ns, "disk", 0, matchLabels("app", "web"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"disk": "ssd", "pool": "web"}, SchedulerName: noScheduler,
	})
	createPolicy(t, p)
	want := "PodSchedulingPolicy/" + ns + "/disk: nodeSelector[disk]"

	// Dry run first: were it recorded, the counts below would be off.
	dry := makePod(ns, "dry").label("app", "web").nodeSelector("disk", "hdd").obj()
	if err := k8s.Create(ctx, dry, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if got := dry.Annotations[policy.SkippedAnnotation]; got != want {
		t.Errorf("dry run: %s = %q, want %q", policy.SkippedAnnotation, got, want)
	}
	// A pod claiming a skip it does not have.
	liar := makePod(ns, "liar").label("app", "web").obj()
	liar.Annotations = map[string]string{policy.SkippedAnnotation: "PodSchedulingPolicy/" + ns + "/disk: nodeName"}
	if got := createPod(t, liar); got.Annotations[policy.SkippedAnnotation] != "" {
		t.Errorf("an annotation the webhook did not set stays: %q", got.Annotations[policy.SkippedAnnotation])
	}

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: webTemplate(),
	}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Annotations[policy.SkippedAnnotation]; got != want {
		t.Errorf("Deployment's %s = %q, want %q", policy.SkippedAnnotation, got, want)
	}
	if d.Spec.Template.Spec.NodeSelector["disk"] != "hdd" || d.Spec.Template.Spec.NodeSelector["pool"] != "web" {
		t.Errorf("template nodeSelector = %v, want its own disk and the policy's pool", d.Spec.Template.Spec.NodeSelector)
	}
	waitSkippedEvent(t, ns, "Deployment", "web")
	pods := waitDeploymentPods(t, ns, "web", 1)
	if got := pods[0].Annotations[policy.SkippedAnnotation]; got != want {
		t.Errorf("the Deployment's pod: %s = %q, want %q", policy.SkippedAnnotation, got, want)
	}
	waitSkippedEvent(t, ns, "Pod", pods[0].Name)
	// Only the Deployment's pod counts: not the dry run, not the liar,
	// not the Deployment (a workload), all recorded before it if at all.
	got := waitSkippedStatus(t, p, pods[0].Name)
	if got.Status.SkippedPods != 1 {
		t.Errorf("skippedPods = %d, want 1", got.Status.SkippedPods)
	}
	events := &eventsv1.EventList{}
	if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Reason == policy.EventPolicyPartsSkipped && (ev.Regarding.Name == "dry" || ev.Regarding.Name == "liar" || ev.Regarding.Kind == "ReplicaSet") {
			t.Errorf("event on %s %s (the dry run, the liar and the Deployment's own ReplicaSet get none): %q", ev.Regarding.Kind, ev.Regarding.Name, ev.Note)
		}
	}
}

// waitSkippedEvent waits for the skipped-parts event on the object.
func waitSkippedEvent(t *testing.T, ns, kind, name string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == policy.EventPolicyPartsSkipped && ev.Regarding.Kind == kind && ev.Regarding.Name == name {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on %s %s: %v", policy.EventPolicyPartsSkipped, kind, name, err)
	}
	return found
}

// waitSkippedStatus waits until p's status records the skip on the pod
// (or workload) named name, and returns it.
func waitSkippedStatus(t *testing.T, p *kupidv1alpha1.PodSchedulingPolicy, name string) *kupidv1alpha1.PodSchedulingPolicy {
	t.Helper()
	got := &kupidv1alpha1.PodSchedulingPolicy{}
	if err := bed.WaitFor(context.Background(), k8s, client.ObjectKeyFromObject(p), got, func(o *kupidv1alpha1.PodSchedulingPolicy) bool {
		return o.Status.LastSkipped != nil && o.Status.LastSkipped.Name == name
	}); err != nil {
		t.Fatalf("%s's status.lastSkipped never named %s: %v", p.Name, name, err)
	}
	return got
}
