package imagestream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// WebhookPath is where build-triggers serves the webhook.
const WebhookPath = "/validate-build-openshift-io-v1-image-stream-references"

// WebhookConfigurationName is the ValidatingWebhookConfiguration that
// calls it (manifests/build-triggers/validating_webhook_configuration.yaml).
const WebhookConfigurationName = "archway-build-image-streams"

// SetupWebhook serves the Webhook from mgr's webhook server at
// WebhookPath, asking discovery at each call whether image streams are
// served.
func SetupWebhook(mgr ctrl.Manager) error {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(WebhookPath, &webhook.Admission{Handler: &Webhook{
		Decoder: admission.NewDecoder(mgr.GetScheme()),
		Served:  func(context.Context) (bool, error) { return Served(dc) },
	}})
	return nil
}

// Served reports whether the cluster serves image streams: discovery lists
// the resource imagestreams in image.openshift.io/v1.
func Served(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(GroupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", GroupVersion, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == Resource }), nil
}

// Webhook refuses the Builds and BuildConfigs whose image references name
// image streams where the cluster serves none, naming each field; where it
// serves them, it refuses only malformed names. Its configuration calls it
// only for objects with such references (matchConditions), so that an
// outage of the webhook, which fails closed, stops nothing else.
type Webhook struct {
	Decoder admission.Decoder
	// Served is asked at each call, so that image streams installed or
	// removed later count at once.
	Served func(context.Context) (bool, error)
}

var _ admission.Handler = (*Webhook)(nil)

// Handle judges one create or update.
func (w *Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	refs, old, err := w.references(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	// An update is judged on the references it adds: an object written
	// while image streams were served stays writable after they are gone.
	refs = slices.DeleteFunc(refs, func(r Reference) bool { return slices.Contains(old, r) })
	if len(refs) == 0 {
		return admission.Allowed("")
	}
	var errs []error
	for _, r := range refs {
		if err := r.Check(); err != nil {
			errs = append(errs, err)
		}
		if err := r.CheckNamespace(req.Namespace); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return admission.Denied(errors.Join(errs...).Error())
	}
	served, err := w.Served(ctx)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if served {
		return admission.Allowed("")
	}
	return admission.Denied(Refusal(refs))
}

// Refusal is the message refusing refs where the cluster serves no image
// streams.
func Refusal(refs []Reference) string {
	var msgs []string
	for _, r := range refs {
		msgs = append(msgs, fmt.Sprintf("%s: kind %s needs OpenShift image streams (%s %s), which this cluster does not serve: "+
			"use kind DockerImage with the image's reference, e.g. registry.example.com/team/base:1.0", r.Field, r.Ref.Kind, GroupVersion, Resource))
	}
	return strings.Join(msgs, "; ")
}

// references decodes the request's object, and on an update the old one,
// into their image stream references.
func (w *Webhook) references(req admission.Request) (refs, old []Reference, err error) {
	switch req.Kind.Kind {
	case "Build":
		var b, o buildv1.Build
		if err := w.Decoder.Decode(req, &b); err != nil {
			return nil, nil, fmt.Errorf("decoding the Build: %w", err)
		}
		refs = SpecReferences(&b.Spec.CommonSpec)
		if req.Operation == admissionv1.Update {
			if err := w.Decoder.DecodeRaw(req.OldObject, &o); err != nil {
				return nil, nil, fmt.Errorf("decoding the old Build: %w", err)
			}
			old = SpecReferences(&o.Spec.CommonSpec)
		}
	case "BuildConfig":
		var bc, o buildv1.BuildConfig
		if err := w.Decoder.Decode(req, &bc); err != nil {
			return nil, nil, fmt.Errorf("decoding the BuildConfig: %w", err)
		}
		refs = BuildConfigReferences(&bc)
		if req.Operation == admissionv1.Update {
			if err := w.Decoder.DecodeRaw(req.OldObject, &o); err != nil {
				return nil, nil, fmt.Errorf("decoding the old BuildConfig: %w", err)
			}
			old = BuildConfigReferences(&o)
		}
	default:
		return nil, nil, fmt.Errorf("unexpected kind %s", req.Kind.Kind)
	}
	return refs, old, nil
}
