package protection

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// ConfigWebhookPath is where the webhook serves ControlPlaneProtection
// creates and updates that set or change spec.override.
const ConfigWebhookPath = "/validate-control-plane-protection-config"

// configWebhook refuses an override that would not lapse soon enough: the
// CRD's schema cannot read the clock.
type configWebhook struct {
	decoder admission.Decoder
	now     func() time.Time
}

var _ admission.Handler = (*configWebhook)(nil)

func (w *configWebhook) Handle(_ context.Context, req admission.Request) admission.Response {
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	if err := w.decoder.Decode(req, cfg); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the ControlPlaneProtection: %w", err))
	}
	var old *schedulingv1alpha1.ControlPlaneProtection
	if req.Operation == admissionv1.Update {
		old = &schedulingv1alpha1.ControlPlaneProtection{}
		if err := w.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old ControlPlaneProtection: %w", err))
		}
	}
	if err := ValidateOverride(cfg, old, w.now()); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}
