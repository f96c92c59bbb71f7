package policy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
)

// noScheduler is a scheduler no bed runs: pods that name it stay unbound,
// so their specs can be compared as admission left them.
const noScheduler = "policy-suite-no-scheduler"

// webTemplate is the pod template of the workload cases: it states a
// nodeSelector key a policy also sets (the template's wins) and a required
// term the policies' terms multiply.
func webTemplate() corev1.PodTemplateSpec {
	p := makePod("", "").label("app", "web").nodeSelector("disk", "hdd").requiredTerms(term(in("gen", "2"))).obj()
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}
}

// webPolicies creates, in ns, a namespaced and a cluster policy that select
// webTemplate's pods, between them setting every field a policy merges.
// It returns their names in merge order, as the annotation lists them.
func webPolicies(t *testing.T, ns string) string {
	createPolicy(t, nsPolicy(ns, "web", 10, matchLabels("app", "web"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector:  map[string]string{"pool": "web", "disk": "ssd"},
		SchedulerName: noScheduler,
		Tolerations:   []corev1.Toleration{tolDedicated},
		Affinity: &corev1.Affinity{
			NodeAffinity: requiredAffinity(term(in("zone", "a")), term(in("zone", "b"))).NodeAffinity,
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: matchLabels("app", "web"), TopologyKey: corev1.LabelHostname,
			}}},
		},
	}))
	createPolicy(t, clusterPolicy("web-"+ns, 0, inNamespace(ns), matchLabels("app", "web"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"pool": "cluster", "tier": "front"},
		Tolerations:  []corev1.Toleration{tolSpot},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 10, Preference: term(in("disk-speed", "fast"))},
		}}},
	}))
	return "PodSchedulingPolicy/" + ns + "/web,ClusterPodSchedulingPolicy/web-" + ns
}

// schedulingFields are the fields of spec a policy merges, without the
// tolerations the apiserver's DefaultTolerationSeconds plugin adds to every
// pod (never to templates).
func schedulingFields(spec corev1.PodSpec) corev1.PodSpec {
	tols := slices.DeleteFunc(slices.Clone(spec.Tolerations), func(t corev1.Toleration) bool {
		return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) && t.TolerationSeconds != nil
	})
	if len(tols) == 0 {
		tols = nil
	}
	return corev1.PodSpec{
		NodeSelector: spec.NodeSelector, NodeName: spec.NodeName, SchedulerName: spec.SchedulerName,
		Tolerations: tols, Affinity: spec.Affinity,
	}
}

// TestWorkloadTemplatesMatchTheirPods: the policies are merged into the pod
// template of every workload kind, by the same rules and selectors as into
// pods (the template's labels and the namespace's), and the pods
// kube-controller-manager creates from a merged Deployment end up identical
// to a pod created directly from the same template.
func TestWorkloadTemplatesMatchTheirPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	refs := webPolicies(t, ns)

	// What a pod of the template gets, created directly (and stored: it
	// stays unbound, as it names no running scheduler).
	tmpl := webTemplate()
	direct := createPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "direct", Labels: tmpl.Labels}, Spec: tmpl.Spec})
	if direct.Spec.SchedulerName != noScheduler || direct.Spec.NodeSelector["pool"] != "web" {
		t.Fatalf("the policies were not merged into the direct pod: %+v", direct.Spec)
	}
	if got := direct.Annotations[policy.AppliedPoliciesAnnotation]; got != refs {
		t.Fatalf("direct pod's %s = %q, want %q", policy.AppliedPoliciesAnnotation, got, refs)
	}

	selector := &metav1.LabelSelector{MatchLabels: tmpl.Labels}
	workloads := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: webTemplate()}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: selector, Template: webTemplate()}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: webTemplate()}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-rs"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: selector, Template: webTemplate()}},
		&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](0), Selector: tmpl.Labels, Template: ptr.To(webTemplate())}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: jobTemplate()}},
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}}}},
	}
	for _, w := range workloads {
		w.SetNamespace(ns)
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatalf("creating %T: %v", w, err)
		}
		// A pod's spec has fields the apiserver defaults in pods only
		// (enableServiceLinks, priority, ...): the scheduling fields are
		// compared.
		if diff := cmp.Diff(schedulingFields(direct.Spec), schedulingFields(templateSpec(w))); diff != "" {
			t.Errorf("%T's stored template is not what a pod of it gets (-pod +template):\n%s", w, diff)
		}
		if got := w.GetAnnotations()[policy.AppliedPoliciesAnnotation]; got != refs {
			t.Errorf("%T's %s = %q, want %q", w, policy.AppliedPoliciesAnnotation, got, refs)
		}
	}

	// kube-controller-manager makes the Deployment's ReplicaSet and pod;
	// the pod is merged again at creation and ends up as the direct one.
	pods := waitDeploymentPods(t, ns, "web", 1)
	for _, p := range pods {
		if diff := cmp.Diff(direct.Spec, p.Spec); diff != "" {
			t.Errorf("pod %s of the Deployment differs from the pod created directly (-direct +deployment's):\n%s", p.Name, diff)
		}
		if diff := cmp.Diff(direct.Annotations, p.Annotations); diff != "" {
			t.Errorf("pod %s's annotations differ from the direct pod's (-direct +deployment's):\n%s", p.Name, diff)
		}
	}
}

// TestWorkloadOwnedByAController: a workload another controller owns is
// left to it. A policy selecting only the ReplicaSets' templates (by the
// pod-template-hash label the Deployment controller adds) would otherwise
// make each ReplicaSet differ from its Deployment's template, and the
// Deployment controller, which finds its ReplicaSet by comparing
// templates, would make new ones without end. The pods get the policy all
// the same, at their creation.
func TestWorkloadOwnedByAController(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	createPolicy(t, nsPolicy(ns, "hashed", 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: appsv1.DefaultDeploymentUniqueLabelKey, Operator: metav1.LabelSelectorOpExists},
	}}, kupidv1alpha1.SchedulingCriteria{Tolerations: []corev1.Toleration{tolSpot}}))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: webTemplate(),
	}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Annotations[policy.AppliedPoliciesAnnotation]; ok || slices.Contains(d.Spec.Template.Spec.Tolerations, tolSpot) {
		t.Fatalf("the policy selects no Deployment template, yet it was merged: %+v", d)
	}
	pods := waitDeploymentPods(t, ns, "web", 1)
	if n := countWith(pods, tolSpot); n != 1 {
		t.Errorf("the pod does not tolerate %q: the policy selects it", tolSpot.Key)
	}
	rsList := &appsv1.ReplicaSetList{}
	if err := k8s.List(ctx, rsList, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(rsList.Items) != 1 {
		t.Fatalf("%d ReplicaSets, want 1: a merged ReplicaSet template no longer matches its Deployment's", len(rsList.Items))
	}
	if slices.Contains(rsList.Items[0].Spec.Template.Spec.Tolerations, tolSpot) {
		t.Errorf("the ReplicaSet's template was merged: %+v", rsList.Items[0].Spec.Template.Spec.Tolerations)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Status.CollisionCount != nil {
		t.Errorf("Deployment status.collisionCount = %d: its controller found a ReplicaSet of its name with another template", *d.Status.CollisionCount)
	}
}

// TestWorkloadUpdates: an update that leaves the template alone merges
// nothing, so a policy created after a Deployment never rolls it out by
// itself; the next change of the template takes the new policy in.
func TestWorkloadUpdates(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	refs := webPolicies(t, ns)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: webTemplate(),
	}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDeploymentPods(t, ns, "web", 1)
	tolLate := corev1.Toleration{Key: "late", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	createPolicy(t, nsPolicy(ns, "late", 0, matchLabels("app", "web"), kupidv1alpha1.SchedulingCriteria{
		Tolerations: []corev1.Toleration{tolLate},
	}))

	// Scaled (the stored object comes back from the update, after every
	// webhook): the template stays, and so does the one ReplicaSet.
	update(t, d, func() { d.Spec.Replicas = ptr.To[int32](2) })
	if slices.Contains(d.Spec.Template.Spec.Tolerations, tolLate) {
		t.Errorf("scaling merged the late policy into the template: %+v", d.Spec.Template.Spec.Tolerations)
	}
	if got := d.Annotations[policy.AppliedPoliciesAnnotation]; got != refs {
		t.Errorf("after scaling, %s = %q, want %q as at creation", policy.AppliedPoliciesAnnotation, got, refs)
	}
	pods := waitDeploymentPods(t, ns, "web", 2)
	rsList := &appsv1.ReplicaSetList{}
	if err := k8s.List(ctx, rsList, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(rsList.Items) != 1 {
		t.Errorf("%d ReplicaSets after scaling, want 1: scaling must not roll out", len(rsList.Items))
	}
	// The new pod gets the late policy at its creation all the same.
	if n := countWith(pods, tolLate); n != 1 {
		t.Errorf("%d of the 2 pods tolerate %q, want the one created after the policy", n, tolLate.Key)
	}

	// The template changed: the late policy is merged in too.
	update(t, d, func() { d.Spec.Template.Labels["version"] = "2" })
	if !slices.Contains(d.Spec.Template.Spec.Tolerations, tolLate) {
		t.Errorf("a template change did not merge the late policy: %+v", d.Spec.Template.Spec.Tolerations)
	}
	// At priority 0, the namespaced late policy comes before the cluster one.
	if want := "PodSchedulingPolicy/" + ns + "/web,PodSchedulingPolicy/" + ns + "/late,ClusterPodSchedulingPolicy/web-" + ns; d.Annotations[policy.AppliedPoliciesAnnotation] != want {
		t.Errorf("%s = %q, want %q", policy.AppliedPoliciesAnnotation, d.Annotations[policy.AppliedPoliciesAnnotation], want)
	}
}

// update reads obj, changes it with change and writes it back, again on a
// conflict (kube-controller-manager writes Deployments too).
func update(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return k8s.Update(context.Background(), obj)
	}); err != nil {
		t.Fatal(err)
	}
}

func jobTemplate() corev1.PodTemplateSpec {
	t := webTemplate()
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	return t
}

// templateSpec is w's pod template's spec.
func templateSpec(w client.Object) corev1.PodSpec {
	switch o := w.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		return o.Spec.Template.Spec
	case *corev1.ReplicationController:
		return o.Spec.Template.Spec
	case *batchv1.Job:
		return o.Spec.Template.Spec
	case *batchv1.CronJob:
		return o.Spec.JobTemplate.Spec.Template.Spec
	}
	panic("no template")
}

// waitDeploymentPods waits until the Deployment name of ns has n pods and
// its status says so, and returns them.
func waitDeploymentPods(t *testing.T, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.Replicas != int32(n) {
			return false, nil
		}
		list := &corev1.PodList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns), client.HasLabels{appsv1.DefaultDeploymentUniqueLabelKey}); err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == n, nil
	})
	if err != nil {
		t.Fatalf("Deployment %s never had %d pods (kube-controller-manager runs in this suite): %v", name, n, err)
	}
	return pods
}

func countWith(pods []corev1.Pod, tol corev1.Toleration) int {
	n := 0
	for _, p := range pods {
		if slices.Contains(p.Spec.Tolerations, tol) {
			n++
		}
	}
	return n
}
