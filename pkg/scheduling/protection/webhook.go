package protection

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// WebhookPath is where the webhook serves pods and pods/binding.
const WebhookPath = "/validate-control-plane-protection"

// webhook decides pod creates, updates and bindings with Decide. It reads
// the config and the nodes' labels from the informer cache only.
type webhook struct {
	decoder  admission.Decoder
	cache    client.Reader
	recorder events.EventRecorder
	metrics  *metrics
	log      logr.Logger
	// denials counts denied requests for the status (nil: not counted).
	denials *denialCounter
	// rbac is asked about what the lists leave unauthorized (nil: only
	// the lists authorize).
	rbac *rbacAuthorizer
}

var _ admission.Handler = (*webhook)(nil)

// Handle denies a request a group in mode Enable does not authorize, and
// admits one a group in mode Inform does not authorize with a warning, an
// event on the pod and audit annotations.
func (w *webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	defer func() { w.metrics.latency.Observe(time.Since(start).Seconds()) }()
	in, ok, err := w.request(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !ok {
		return admission.Allowed("")
	}
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	if err := w.cache.Get(ctx, types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("")
		}
		// Fail closed: a request this webhook cannot judge is not let
		// through (the apiserver's failurePolicy says the same).
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading ControlPlaneProtection: %w", err))
	}
	// The override lapses by the clock alone: nothing has to run for it.
	now := time.Now()
	cfg = Effective(cfg, now)
	var nodes []Node
	if enforcing(cfg) && mayReach(in) {
		if nodes, err = w.nodes(ctx, in); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading nodes: %w", err))
		}
	}
	resp := admission.Allowed("")
	resp.AuditAnnotations = map[string]string{}
	for _, d := range Decide(cfg, nodes, in) {
		key := strings.ToLower(string(d.Group))
		if (d.Result == ResultDenied || d.Result == ResultWarned) && w.rbac != nil {
			// The lists do not authorize it; a binding may.
			allowed, err := w.rbac.allowed(ctx, req.UserInfo, in.Namespace, d.Group)
			if err != nil {
				w.log.Error(err, "asking RBAC; the lists decide", "user", in.User, "namespace", in.Namespace, "pod", in.Name)
			}
			if allowed {
				d.Result, d.ActorAuthorized, d.NamespaceAuthorized, d.Message = ResultAuthorized, true, true, ""
				resp.AuditAnnotations[key+"-authorized-by"] = "rbac"
			}
		}
		w.metrics.decisions.WithLabelValues(string(d.Group), string(d.Mode), string(d.Result)).Inc()
		switch d.Result {
		case ResultDenied:
			w.log.V(1).Info("denied", "user", in.User, "namespace", in.Namespace, "pod", in.Name, "message", d.Message)
			denied := admission.Denied(d.Message)
			denied.AuditAnnotations = map[string]string{key + "-decision": string(d.Result), key + "-reason": d.Message}
			if w.denials != nil && (req.DryRun == nil || !*req.DryRun) {
				w.denials.record(schedulingv1alpha1.Denial{
					Time: metav1.NewTime(now), Group: d.Group, Operation: string(in.Operation),
					User: in.User, Namespace: in.Namespace, Pod: in.Name,
				})
			}
			return denied
		case ResultWarned:
			w.log.V(1).Info("warned", "user", in.User, "namespace", in.Namespace, "pod", in.Name, "message", d.Message)
			resp.Warnings = append(resp.Warnings, d.Message)
			resp.AuditAnnotations[key+"-decision"] = string(d.Result)
			resp.AuditAnnotations[key+"-reason"] = d.Message
			if req.DryRun == nil || !*req.DryRun {
				w.event(req, in, d)
			}
		case ResultAuthorized:
			resp.AuditAnnotations[key+"-decision"] = string(d.Result)
		}
	}
	return resp
}

// request turns an admission request into a decision's Request; ok is
// false for what the webhook does not judge (other subresources, deletes).
func (w *webhook) request(req admission.Request) (in Request, ok bool, err error) {
	in = Request{User: req.UserInfo.Username, Groups: req.UserInfo.Groups, Namespace: req.Namespace, Name: req.Name}
	switch {
	case req.SubResource == "binding" && req.Operation == admissionv1.Create:
		binding := &corev1.Binding{}
		if err := w.decoder.Decode(req, binding); err != nil {
			return in, false, fmt.Errorf("decoding the binding: %w", err)
		}
		in.Operation, in.BindingNode = OpBind, binding.Target.Name
		if in.Name == "" {
			in.Name = binding.Name
		}
		return in, true, nil
	case req.SubResource != "":
		return in, false, nil
	case req.Operation == admissionv1.Create:
		in.Operation, in.Pod = OpCreate, &corev1.Pod{}
		if err := w.decoder.Decode(req, in.Pod); err != nil {
			return in, false, fmt.Errorf("decoding the pod: %w", err)
		}
	case req.Operation == admissionv1.Update:
		in.Operation, in.Pod, in.OldPod = OpUpdate, &corev1.Pod{}, &corev1.Pod{}
		if err := w.decoder.Decode(req, in.Pod); err != nil {
			return in, false, fmt.Errorf("decoding the pod: %w", err)
		}
		if err := w.decoder.DecodeRaw(req.OldObject, in.OldPod); err != nil {
			return in, false, fmt.Errorf("decoding the old pod: %w", err)
		}
	default:
		return in, false, nil
	}
	if in.Name == "" {
		in.Name = in.Pod.Name
	}
	return in, true, nil
}

// enforcing says whether any group is in a mode other than Disable.
func enforcing(cfg *schedulingv1alpha1.ControlPlaneProtection) bool {
	for _, g := range cfg.Spec.Groups {
		if g.Mode == schedulingv1alpha1.ModeEnable || g.Mode == schedulingv1alpha1.ModeInform {
			return true
		}
	}
	return false
}

// mayReach says whether the request could have a path at all: a pod with
// no node named, no toleration and no node selection has none, and the
// nodes need not be read.
func mayReach(in Request) bool {
	if in.Operation == OpBind {
		return true
	}
	p := in.Pod
	return p != nil && (p.Spec.NodeName != "" || len(p.Spec.Tolerations) > 0 || hasRequiredSelection(p))
}

// nodes reads the nodes the decision needs from the cache: the binding's
// target, the named node, or every node (metadata only, not copied).
func (w *webhook) nodes(ctx context.Context, in Request) ([]Node, error) {
	name := in.BindingNode
	if in.Operation != OpBind && in.Pod.Spec.NodeName != "" && (in.OldPod == nil || in.OldPod.Spec.NodeName != "") {
		name = in.Pod.Spec.NodeName
	}
	if name != "" {
		n := &metav1.PartialObjectMetadata{TypeMeta: nodeType}
		switch err := w.cache.Get(ctx, types.NamespacedName{Name: name}, n); {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []Node{{Name: n.Name, Labels: n.Labels}}, nil
	}
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	if err := w.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, len(list.Items))
	for _, n := range list.Items {
		nodes = append(nodes, Node{Name: n.Name, Labels: n.Labels})
	}
	return nodes, nil
}

var nodeType = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}

// event records the warning on the pod: the apiserver has already given
// the pod its UID when validating webhooks see it, and a binding carries
// its pod's.
func (w *webhook) event(req admission.Request, in Request, d Decision) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: in.Namespace, Name: in.Name}
	switch {
	case in.Pod != nil:
		ref.UID = in.Pod.UID
	default:
		binding := &corev1.Binding{}
		if err := w.decoder.Decode(req, binding); err == nil {
			ref.UID = binding.UID
		}
	}
	action := map[Operation]string{OpCreate: "Create", OpUpdate: "Update", OpBind: "Bind"}[in.Operation]
	w.recorder.Eventf(ref, nil, corev1.EventTypeWarning, EventUnauthorizedPlacement, action, "%s", d.Message)
}
