package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

func testTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName,
			Containers:    []corev1.Container{{Name: "c", Image: "i"}},
			NodeSelector:  map[string]string{"disk": "hdd"},
		},
	}
}

// testWorkloads returns one workload of every kind, each with
// testTemplate, and meta applied to its metadata.
func testWorkloads(meta func(*metav1.ObjectMeta)) map[string]client.Object {
	t := testTemplate()
	objs := map[string]client.Object{
		"Deployment":            &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: *t.DeepCopy()}},
		"StatefulSet":           &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: *t.DeepCopy()}},
		"DaemonSet":             &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: *t.DeepCopy()}},
		"ReplicaSet":            &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: *t.DeepCopy()}},
		"ReplicationController": &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: t.DeepCopy()}},
		"Job":                   &batchv1.Job{Spec: batchv1.JobSpec{Template: *t.DeepCopy()}},
		"CronJob":               &batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *t.DeepCopy()}}}},
	}
	for _, o := range objs {
		o.SetName("w")
		o.SetNamespace("ns")
		if meta != nil {
			m := metav1.ObjectMeta{}
			meta(&m)
			o.SetAnnotations(m.Annotations)
			o.SetOwnerReferences(m.OwnerReferences)
		}
	}
	return objs
}

// TestWorkloadKindsCovered: every kind the webhook decodes has a template
// podTemplate finds.
func TestWorkloadKindsCovered(t *testing.T) {
	objs := testWorkloads(nil)
	if len(objs) != len(workloadKinds) {
		t.Fatalf("%d test workloads for %d kinds", len(objs), len(workloadKinds))
	}
	for gvk, newObj := range workloadKinds {
		if _, ok := objs[gvk.Kind]; !ok {
			t.Errorf("no test workload of kind %s", gvk.Kind)
		}
		if _, path := podTemplate(newObj()); path == "" {
			t.Errorf("podTemplate does not know %s", gvk)
		}
	}
}

// TestWorkloadPatch applies the webhook's patch to each kind's JSON and
// checks the template is the merged spec (what a pod of the template
// would get), the workload names the policy, and nothing else changed.
func TestWorkloadPatch(t *testing.T) {
	policies := []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"zone": "a", "disk": "ssd"}, SchedulerName: "s",
		Tolerations: []corev1.Toleration{tolSpot}, Affinity: required(term(poolEtc)),
	})}
	tmpl := testTemplate()
	wantSpec, _ := Merge(&tmpl.Spec, policies)
	for _, annotations := range []map[string]string{nil, {"keep": "me"}} {
		for kind, obj := range testWorkloads(func(m *metav1.ObjectMeta) { m.Annotations = annotations }) {
			t.Run(kind, func(t *testing.T) {
				ops, outcomes, err := workloadPatch(obj, policies)
				if err != nil {
					t.Fatal(err)
				}
				if len(outcomes) != 1 || !outcomes[0].Changed || !cmp.Equal(outcomes[0].Kept, []string{"nodeSelector[disk]"}) {
					t.Errorf("outcomes = %+v, want p changed with nodeSelector[disk] kept", outcomes)
				}
				got := workloadKinds[gvkOf(t, kind)]()
				applyPatch(t, obj, ops, got)
				want := obj.DeepCopyObject().(client.Object)
				wt, _ := podTemplate(want)
				wt.Spec = *wantSpec
				a := map[string]string{
					AppliedPoliciesAnnotation: "PodSchedulingPolicy/ns/p",
					SkippedAnnotation:         "PodSchedulingPolicy/ns/p: nodeSelector[disk]",
				}
				for k, v := range annotations {
					a[k] = v
				}
				want.SetAnnotations(a)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("patched workload (-want +got):\n%s", diff)
				}

				// Merging the patched workload again changes nothing.
				again, _, err := workloadPatch(got, policies)
				if err != nil {
					t.Fatal(err)
				}
				if len(again) != 0 {
					t.Errorf("merging again patches %+v", again)
				}
			})
		}
	}
}

func gvkOf(t *testing.T, kind string) schema.GroupVersionKind {
	t.Helper()
	for gvk := range workloadKinds {
		if gvk.Kind == kind {
			return gvk
		}
	}
	t.Fatalf("no kind %s", kind)
	return schema.GroupVersionKind{}
}

func TestMergesTemplate(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "u", Controller: ptr.To(true)}
	notController := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u2"}
	changed := func(o client.Object) client.Object {
		c := o.DeepCopyObject().(client.Object)
		tmpl, _ := podTemplate(c)
		tmpl.Labels["version"] = "2"
		return c
	}
	scaled := func(o client.Object) client.Object {
		c := o.DeepCopyObject().(client.Object)
		c.SetLabels(map[string]string{"scaled": "yes"})
		return c
	}
	for kind, obj := range testWorkloads(nil) {
		t.Run(kind, func(t *testing.T) {
			cases := []struct {
				name     string
				obj, old client.Object
				want     bool
				why      string
			}{
				{"created", obj, nil, true, ""},
				{"created with an owner that is not its controller", withOwner(obj, notController), nil, true, ""},
				{"created by a controller", withOwner(obj, owner), nil, false, workloadOwned},
				{"updated, template changed", changed(obj), obj, true, ""},
				{"updated, template unchanged", scaled(obj), obj, false, workloadTemplateUnchanged},
				{"updated by its controller, template changed", changed(withOwner(obj, owner)), withOwner(obj, owner), false, workloadOwned},
			}
			for _, tc := range cases {
				ok, why := mergesTemplate(tc.obj, tc.old)
				if ok != tc.want || why != tc.why {
					t.Errorf("%s: mergesTemplate = %v, %q; want %v, %q", tc.name, ok, why, tc.want, tc.why)
				}
			}
		})
	}
	rc := &corev1.ReplicationController{}
	if ok, why := mergesTemplate(rc, nil); ok || why != workloadNoTemplate {
		t.Errorf("ReplicationController without a template: %v, %q", ok, why)
	}
}

func withOwner(o client.Object, ref metav1.OwnerReference) client.Object {
	c := o.DeepCopyObject().(client.Object)
	c.SetOwnerReferences([]metav1.OwnerReference{ref})
	return c
}
