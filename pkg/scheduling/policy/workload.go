package policy

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The workload kinds whose pod templates the webhook merges policies into,
// as kupid does: a rollout's pods then match the policies before they
// exist, and the workload shows what its pods get. Their pods are merged
// again when they are created (the pod webhook), with the same rules, so a
// pod gets the same whether its template was merged or not.
var workloadKinds = map[schema.GroupVersionKind]func() client.Object{
	appsv1.SchemeGroupVersion.WithKind("Deployment"):            func() client.Object { return &appsv1.Deployment{} },
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"):           func() client.Object { return &appsv1.StatefulSet{} },
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):             func() client.Object { return &appsv1.DaemonSet{} },
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):            func() client.Object { return &appsv1.ReplicaSet{} },
	corev1.SchemeGroupVersion.WithKind("ReplicationController"): func() client.Object { return &corev1.ReplicationController{} },
	batchv1.SchemeGroupVersion.WithKind("Job"):                  func() client.Object { return &batchv1.Job{} },
	batchv1.SchemeGroupVersion.WithKind("CronJob"):              func() client.Object { return &batchv1.CronJob{} },
}

// podTemplate returns obj's pod template and the JSON pointer to it; nil
// when obj is of no workload kind or has no template (a
// ReplicationController may have none).
func podTemplate(obj client.Object) (*corev1.PodTemplateSpec, string) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template, "/spec/template"
	case *appsv1.StatefulSet:
		return &o.Spec.Template, "/spec/template"
	case *appsv1.DaemonSet:
		return &o.Spec.Template, "/spec/template"
	case *appsv1.ReplicaSet:
		return &o.Spec.Template, "/spec/template"
	case *corev1.ReplicationController:
		return o.Spec.Template, "/spec/template"
	case *batchv1.Job:
		return &o.Spec.Template, "/spec/template"
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template, "/spec/jobTemplate/spec/template"
	}
	return nil, ""
}

// Why a workload's template is left as it came (the result label of
// archway_scheduling_policy_workloads_total).
const (
	// workloadOwned: another controller owns the workload (a Deployment's
	// ReplicaSet, a CronJob's Job) and writes its template from its own,
	// which was merged. Merging the copy could only make it differ from
	// its owner's, and the Deployment controller, which finds its
	// ReplicaSets by comparing templates, would roll out again and again.
	workloadOwned = "owned"
	// workloadTemplateUnchanged: an update that leaves the template as it
	// was (replicas, the workload's labels, a controller's annotations)
	// merges nothing, so a policy created since never starts a rollout by
	// itself; the next change of the template takes it in.
	workloadTemplateUnchanged = "template-unchanged"
	// workloadNoTemplate: a ReplicationController without a template.
	workloadNoTemplate = "no-template"
)

// mergesTemplate reports whether the webhook merges the policies into the
// template of obj, being created (old nil) or updated from old, and if
// not, why (one of the workload* reasons).
func mergesTemplate(obj, old client.Object) (bool, string) {
	tmpl, _ := podTemplate(obj)
	if tmpl == nil {
		return false, workloadNoTemplate
	}
	if metav1.GetControllerOfNoCopy(obj) != nil {
		return false, workloadOwned
	}
	if old != nil {
		if prev, _ := podTemplate(old); prev != nil && equality.Semantic.DeepEqual(prev, tmpl) {
			return false, workloadTemplateUnchanged
		}
	}
	return true, ""
}
