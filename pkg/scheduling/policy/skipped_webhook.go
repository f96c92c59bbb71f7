package policy

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// SkippedWebhookPath is where the webhook records the parts of policies
// that were not applied.
const SkippedWebhookPath = "/validate-scheduling-policy-skipped"

// EventPolicyPartsSkipped is recorded on a pod or workload for each policy
// that selected it with parts not applied; the event's related object is
// the policy.
const EventPolicyPartsSkipped = "SchedulingPolicyPartsSkipped"

// skippedWebhook records, for a pod or workload the mutating webhooks
// marked with SkippedAnnotation, an event per policy with parts not
// applied, the policy's status (lastSkipped, and skippedPods for a pod) and
// a metric. It is a validating webhook because the mutating ones see a
// new object before the apiserver names it (generateName) and gives it its
// UID, which an event needs to show in kubectl describe; and it is called
// once per request, never reinvoked, so nothing is counted twice. It
// always admits.
//
// The annotation only says that there is something to record: what was
// skipped is worked out again from the object as it is now and the
// policies in the informer cache (the merge is idempotent, so this gives
// what the mutating webhook found), so a user who writes the annotation
// by hand cannot make the webhook blame a policy that does not select the
// object.
type skippedWebhook struct {
	decoder  admission.Decoder
	policies policyReader
	status   *StatusRecorder
	recorder events.EventRecorder
	metrics  *metrics
	log      logr.Logger
	now      func() time.Time
}

var _ admission.Handler = (*skippedWebhook)(nil)

func (w *skippedWebhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	allowed := admission.Allowed("")
	if (req.DryRun != nil && *req.DryRun) || req.SubResource != "" {
		return allowed
	}
	gvk := schema.GroupVersionKind(req.Kind)
	var obj client.Object
	var spec *corev1.PodSpec
	switch {
	case gvk == corev1.SchemeGroupVersion.WithKind("Pod") && req.Operation == admissionv1.Create:
		pod := &corev1.Pod{}
		obj, spec = pod, &pod.Spec
	case workloadKinds[gvk] != nil && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		obj = workloadKinds[gvk]()
	default:
		return allowed
	}
	if err := w.decoder.Decode(req, obj); err != nil {
		w.log.Error(err, "decoding the object; nothing recorded", "kind", gvk.Kind, "namespace", req.Namespace)
		return allowed
	}
	if _, marked := obj.GetAnnotations()[SkippedAnnotation]; !marked {
		return allowed
	}
	labels := obj.GetLabels()
	if spec == nil {
		if metav1.GetControllerOfNoCopy(obj) != nil {
			return allowed // its owner's template was merged and recorded
		}
		if req.Operation == admissionv1.Update {
			old := workloadKinds[gvk]()
			if err := w.decoder.DecodeRaw(req.OldObject, old); err == nil &&
				old.GetAnnotations()[SkippedAnnotation] == obj.GetAnnotations()[SkippedAnnotation] {
				return allowed // recorded when it was set
			}
		}
		tmpl, _ := podTemplate(obj)
		if tmpl == nil {
			return allowed
		}
		labels, spec = tmpl.Labels, &tmpl.Spec
	}
	sel, err := w.policies.selection(ctx, req.Namespace, labels)
	if err != nil {
		w.log.Error(err, "reading scheduling policies; nothing recorded", "kind", gvk.Kind, "namespace", req.Namespace, "name", obj.GetName())
		return allowed
	}
	_, outcomes := Merge(spec, sel.Selected)
	at := w.now()
	regarding := &corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}
	if regarding.Namespace == "" {
		regarding.Namespace = req.Namespace
	}
	what := "the template"
	if gvk.Kind == "Pod" {
		what = "the pod"
	}
	for _, o := range outcomes {
		if len(o.Kept) == 0 {
			continue
		}
		p := o.Policy
		for _, part := range o.Kept {
			w.metrics.skipped.WithLabelValues(p.Ref(), gvk.Kind, partKind(part)).Inc()
		}
		w.recorder.Eventf(regarding, policyReference(p), corev1.EventTypeWarning, EventPolicyPartsSkipped, "MergeSchedulingPolicy",
			"%s not applied in part: %s: %s, or a policy merged before it, already has another value",
			p.Ref(), strings.Join(o.Kept, ", "), what)
		w.status.RecordSkipped(p, kupidv1alpha1.SkippedParts{
			Kind: gvk.Kind, Namespace: regarding.Namespace, Name: regarding.Name, Parts: o.Kept, Time: metav1.NewTime(at),
		}, gvk.Kind == "Pod")
	}
	return allowed
}

// policyReference is the event's related object.
func policyReference(p Policy) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: kupidv1alpha1.GroupVersion.String(), Kind: p.Kind,
		Namespace: p.Namespace, Name: p.Name, UID: p.UID,
	}
}
