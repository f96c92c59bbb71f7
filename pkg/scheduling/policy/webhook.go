package policy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// Webhook paths.
const (
	WebhookPath                              = "/mutate-v1-pod-scheduling-policy"
	PodSchedulingPolicyValidationPath        = "/validate-kupid-gardener-cloud-v1alpha1-podschedulingpolicy"
	ClusterPodSchedulingPolicyValidationPath = "/validate-kupid-gardener-cloud-v1alpha1-clusterpodschedulingpolicy"
)

// AppliedPoliciesAnnotation lists, on a pod, the policies that selected it
// at creation, in merge order ("Kind/[namespace/]name", comma-separated),
// so a user can tell where its scheduling criteria came from.
const AppliedPoliciesAnnotation = "scheduling.archway.dev/policies"

// podWebhook merges the policies that select a new pod into it. It reads
// policies and namespaces from the informer cache (a namespace the cache
// has not seen yet, created just before the pod, is read once from the
// apiserver) and never denies: whatever goes wrong, the pod is admitted as
// it came.
type podWebhook struct {
	decoder  admission.Decoder
	policies policyReader
	status   *StatusRecorder
	metrics  *metrics
	log      logr.Logger
	now      func() time.Time
}

// policyReader reads the policies that may select a pod, and its
// namespace's labels, from the informer cache.
type policyReader struct {
	cache     client.Reader
	apiReader client.Reader
}

var _ admission.Handler = (*podWebhook)(nil)

// Handle answers with a JSON patch of exactly the fields the merge
// changed, rather than a diff of the re-encoded pod.
func (w *podWebhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	start := w.now()
	defer func() { w.metrics.latency.Observe(time.Since(start).Seconds()) }()
	pod := &corev1.Pod{}
	if err := w.decoder.Decode(req, pod); err != nil {
		w.metrics.pods.WithLabelValues(podError).Inc()
		w.log.Error(err, "decoding the pod; admitting it unchanged", "namespace", req.Namespace)
		return admission.Allowed("")
	}
	namespace := req.Namespace
	sel, err := w.policies.selection(ctx, namespace, pod.Labels)
	if err != nil {
		w.metrics.pods.WithLabelValues(podError).Inc()
		w.log.Error(err, "reading scheduling policies; admitting the pod unchanged", "namespace", namespace)
		return admission.Allowed("")
	}
	for ref, err := range sel.Invalid {
		w.metrics.mutations.WithLabelValues(ref, resultInvalid).Inc()
		w.log.Info("skipping an invalid scheduling policy", "policy", ref, "reason", err.Error())
	}
	if len(sel.Selected) == 0 {
		w.metrics.pods.WithLabelValues(podNoPolicy).Inc()
		// A pod made from another's manifest may carry its annotations:
		// they are not true of this one.
		if patch := annotationsPatch("/metadata/annotations", pod.Annotations, map[string]string{
			AppliedPoliciesAnnotation: "", SkippedAnnotation: "",
		}); len(patch) > 0 {
			return admission.Patched("", patch...)
		}
		return admission.Allowed("")
	}
	merged, outcomes := Merge(&pod.Spec, sel.Selected)
	// On reinvocation the pod already names the policies applied the
	// first time: they are not counted again.
	seen := strings.Split(pod.Annotations[AppliedPoliciesAnnotation], ",")
	refs := make([]string, 0, len(outcomes))
	dryRun := req.DryRun != nil && *req.DryRun
	for _, o := range outcomes {
		ref := o.Policy.Ref()
		refs = append(refs, ref)
		result := resultUnchanged
		if o.Changed {
			result = resultChanged
		}
		if slices.Contains(seen, ref) {
			continue
		}
		w.metrics.mutations.WithLabelValues(ref, result).Inc()
		if !dryRun {
			w.status.Record(o.Policy, start)
		}
	}
	patch, err := specPatch("/spec", &pod.Spec, merged)
	if err != nil {
		w.metrics.pods.WithLabelValues(podError).Inc()
		w.log.Error(err, "encoding the patch; admitting the pod unchanged", "namespace", namespace)
		return admission.Allowed("")
	}
	patch = append(patch, annotationsPatch("/metadata/annotations", pod.Annotations, map[string]string{
		AppliedPoliciesAnnotation: strings.Join(refs, ","),
		SkippedAnnotation:         formatSkips(skips(outcomes)),
	})...)
	if len(patch) == 0 {
		w.metrics.pods.WithLabelValues(podUnchanged).Inc()
		return admission.Allowed("")
	}
	w.metrics.pods.WithLabelValues(podMutated).Inc()
	return admission.Patched("", patch...)
}

// selection reads the candidate policies and the namespace's labels and
// returns the policies that select a pod with podLabels (or a pod template
// with them) in namespace.
func (w policyReader) selection(ctx context.Context, namespace string, podLabels labels.Set) (Selection, error) {
	var c Candidates
	namespaced := &kupidv1alpha1.PodSchedulingPolicyList{}
	if err := w.cache.List(ctx, namespaced, client.InNamespace(namespace)); err != nil {
		return Selection{}, err
	}
	c.Namespaced = namespaced.Items
	cluster := &kupidv1alpha1.ClusterPodSchedulingPolicyList{}
	if err := w.cache.List(ctx, cluster); err != nil {
		return Selection{}, err
	}
	c.Cluster = cluster.Items
	var nsLabels labels.Set
	if len(c.Cluster) > 0 {
		ns := &corev1.Namespace{}
		err := w.cache.Get(ctx, types.NamespacedName{Name: namespace}, ns)
		if apierrors.IsNotFound(err) {
			err = w.apiReader.Get(ctx, types.NamespacedName{Name: namespace}, ns)
		}
		if err != nil {
			return Selection{}, err
		}
		nsLabels = ns.Labels
	}
	return Select(c, podLabels, nsLabels), nil
}

// specPatch returns "add" operations (which replace a member that exists)
// for the scheduling fields of merged that differ from orig, for the pod
// spec at the JSON pointer path ("/spec" for a pod).
func specPatch(path string, orig, merged *corev1.PodSpec) ([]jsonpatch.Operation, error) {
	var ops []jsonpatch.Operation
	add := func(field string, differs bool, value any) error {
		if !differs {
			return nil
		}
		// Round-trip through JSON so the patch holds plain values.
		raw, err := json.Marshal(value)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		ops = append(ops, jsonpatch.NewOperation("add", path+"/"+field, v))
		return nil
	}
	for _, f := range []struct {
		name    string
		differs bool
		value   any
	}{
		{"nodeSelector", !equality.Semantic.DeepEqual(orig.NodeSelector, merged.NodeSelector), merged.NodeSelector},
		{"nodeName", orig.NodeName != merged.NodeName, merged.NodeName},
		{"schedulerName", orig.SchedulerName != merged.SchedulerName, merged.SchedulerName},
		{"tolerations", !equality.Semantic.DeepEqual(orig.Tolerations, merged.Tolerations), merged.Tolerations},
		{"affinity", !equality.Semantic.DeepEqual(orig.Affinity, merged.Affinity), merged.Affinity},
	} {
		if err := add(f.name, f.differs, f.value); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// annotationsPatch returns the operations that make the annotations at
// the JSON pointer path, now current, hold each key of set with its value,
// or not hold it when the value is empty.
func annotationsPatch(path string, current, set map[string]string) []jsonpatch.Operation {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ops []jsonpatch.Operation
	added := map[string]string{}
	for _, k := range keys {
		v, have := current[k]
		switch {
		case set[k] == "" && have:
			ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+escapePointer(k), nil))
		case set[k] != "" && (!have || v != set[k]):
			added[k] = set[k]
		}
	}
	if current == nil {
		if len(added) > 0 {
			ops = append(ops, jsonpatch.NewOperation("add", path, added))
		}
		return ops
	}
	for _, k := range keys {
		if v, ok := added[k]; ok {
			ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escapePointer(k), v))
		}
	}
	return ops
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// policyValidator serves the validation rules of validation.go when a
// policy is created or updated.
type policyValidator[T client.Object] struct {
	validate func(T) error
}

func (v policyValidator[T]) ValidateCreate(_ context.Context, p T) (admission.Warnings, error) {
	return nil, v.validate(p)
}

func (v policyValidator[T]) ValidateUpdate(_ context.Context, _, p T) (admission.Warnings, error) {
	return nil, v.validate(p)
}

func (v policyValidator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func validatePodPolicy(p *kupidv1alpha1.PodSchedulingPolicy) error {
	if errs := ValidatePodSchedulingPolicy(p); len(errs) > 0 {
		return apierrors.NewInvalid(kupidv1alpha1.GroupVersion.WithKind(KindPodSchedulingPolicy).GroupKind(), p.Name, errs)
	}
	return nil
}

func validateClusterPolicy(p *kupidv1alpha1.ClusterPodSchedulingPolicy) error {
	if errs := ValidateClusterPodSchedulingPolicy(p); len(errs) > 0 {
		return apierrors.NewInvalid(kupidv1alpha1.GroupVersion.WithKind(KindClusterPodSchedulingPolicy).GroupKind(), p.Name, errs)
	}
	return nil
}
