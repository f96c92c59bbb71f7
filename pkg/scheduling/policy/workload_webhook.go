package policy

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// WorkloadWebhookPath is where the webhook merges policies into the pod
// templates of workloads.
const WorkloadWebhookPath = "/mutate-scheduling-policy-workloads"

// workloadWebhook merges the policies that select a workload's pod
// template (by the template's labels and the namespace's) into the
// template, by the rules the pod webhook merges them into pods with. It
// runs on creates and on updates that change the template. The policies
// applied are named on the workload's own metadata, not the template's, so
// its pods do not inherit the annotation: each pod is merged, named and
// counted again when it is created, as a pod created directly would be.
// Like the pod webhook, it never denies.
type workloadWebhook struct {
	decoder  admission.Decoder
	policies policyReader
	metrics  *metrics
	log      logr.Logger
}

var _ admission.Handler = (*workloadWebhook)(nil)

// Handle answers with a JSON patch of the template's scheduling fields the
// merge changed and of the workload's annotation.
func (w *workloadWebhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	gvk := schema.GroupVersionKind(req.Kind)
	newObj := workloadKinds[gvk]
	if newObj == nil || req.SubResource != "" {
		return admission.Allowed("")
	}
	kind := gvk.Kind
	count := func(result string) { w.metrics.workloads.WithLabelValues(kind, result).Inc() }
	obj := newObj()
	if err := w.decoder.Decode(req, obj); err != nil {
		count(podError)
		w.log.Error(err, "decoding the workload; admitting it unchanged", "kind", kind, "namespace", req.Namespace, "name", req.Name)
		return admission.Allowed("")
	}
	var old client.Object
	if req.Operation == admissionv1.Update {
		old = newObj()
		if err := w.decoder.DecodeRaw(req.OldObject, old); err != nil {
			count(podError)
			w.log.Error(err, "decoding the workload's old version; admitting it unchanged", "kind", kind, "namespace", req.Namespace, "name", req.Name)
			return admission.Allowed("")
		}
	}
	if ok, why := mergesTemplate(obj, old); !ok {
		count(why)
		return admission.Allowed("")
	}
	tmpl, _ := podTemplate(obj)
	sel, err := w.policies.selection(ctx, req.Namespace, tmpl.Labels)
	if err != nil {
		count(podError)
		w.log.Error(err, "reading scheduling policies; admitting the workload unchanged", "kind", kind, "namespace", req.Namespace, "name", req.Name)
		return admission.Allowed("")
	}
	for ref, err := range sel.Invalid {
		w.log.Info("skipping an invalid scheduling policy", "policy", ref, "reason", err.Error())
	}
	patch, outcomes, err := workloadPatch(obj, sel.Selected)
	if err != nil {
		count(podError)
		w.log.Error(err, "encoding the patch; admitting the workload unchanged", "kind", kind, "namespace", req.Namespace, "name", req.Name)
		return admission.Allowed("")
	}
	switch {
	case len(patch) > 0:
		count(podMutated)
		return admission.Patched("", patch...)
	case len(outcomes) == 0:
		count(podNoPolicy)
	default:
		count(podUnchanged)
	}
	return admission.Allowed("")
}

// workloadPatch merges policies into obj's pod template and returns the
// patch that does it to the workload as the apiserver sent it: the
// template's scheduling fields that changed, and the workload's
// annotations naming the policies and the parts of them not applied
// (removed when none selects the template, or none was skipped: what an
// earlier merge added stays in the template).
func workloadPatch(obj client.Object, policies []Policy) ([]jsonpatch.Operation, []Outcome, error) {
	tmpl, path := podTemplate(obj)
	merged, outcomes := Merge(&tmpl.Spec, policies)
	patch, err := specPatch(path+"/spec", &tmpl.Spec, merged)
	if err != nil {
		return nil, nil, err
	}
	refs := make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		refs = append(refs, o.Policy.Ref())
	}
	patch = append(patch, annotationsPatch("/metadata/annotations", obj.GetAnnotations(), map[string]string{
		AppliedPoliciesAnnotation: strings.Join(refs, ","),
		SkippedAnnotation:         formatSkips(skips(outcomes)),
	})...)
	return patch, outcomes, nil
}
