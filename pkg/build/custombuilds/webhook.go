package custombuilds

import (
	"context"
	"fmt"
	"net/http"
	"time"

	openshiftbuildv1 "github.com/openshift/api/build/v1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// WebhookPath is where build-controller serves the webhook.
const WebhookPath = "/validate-build-openshift-io-v1-custom-builds"

// WebhookConfigurationName is the ValidatingWebhookConfiguration that
// calls it (manifests/openshift-builds/webhook).
const WebhookConfigurationName = "archway-custom-builds"

// ConfigureCache narrows the manager's cache of ConfigMaps to the one the
// webhook reads, in namespace.
func ConfigureCache(o *cache.Options, namespace string) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.ConfigMap{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", ConfigMapName),
	}
}

// Setup serves the Webhook from mgr's webhook server at WebhookPath,
// reading the images admitted from the ConfigMap ConfigMapName in
// namespace through the manager's cache (ConfigureCache), whose informer it
// starts up front: a change of the ConfigMap counts as soon as the watch
// delivers it, and no admission reads the apiserver. A readiness check
// named "custom-builds-cache" fails until the informer has synced.
func Setup(mgr ctrl.Manager, namespace string) error {
	reader := mgr.GetCache()
	if _, err := reader.GetInformer(context.Background(), &corev1.ConfigMap{}); err != nil {
		return fmt.Errorf("custom builds webhook: informer for ConfigMaps: %w", err)
	}
	// Not ready until the ConfigMap's informer has synced.
	err := mgr.AddReadyzCheck("custom-builds-cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !reader.WaitForCacheSync(ctx) {
			return fmt.Errorf("the informer of ConfigMap %s/%s has not synced", namespace, ConfigMapName)
		}
		return nil
	})
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: namespace, Name: ConfigMapName}
	mgr.GetWebhookServer().Register(WebhookPath, &webhook.Admission{Handler: &Webhook{
		ConfigMap: key.String(),
		Images: func(ctx context.Context) (string, error) {
			var cm corev1.ConfigMap
			err := reader.Get(ctx, key, &cm)
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return cm.Data[ImageKey], err
		},
	}})
	return nil
}

// Webhook judges the creates and updates of Builds and BuildConfigs by
// Check. Its configuration sends it only custom builders' writes that
// change the strategy (matchConditions), so that an outage, which fails
// closed, stops no other build; for API servers that do not evaluate
// matchConditions (openshift-apiserver before Kubernetes 1.28) it admits
// the others itself.
type Webhook struct {
	// ConfigMap is namespace/name of the ConfigMap Images reads, for
	// messages.
	ConfigMap string
	// Images returns the ConfigMap's image value, empty when there is no
	// ConfigMap: then every custom builder is refused.
	Images func(context.Context) (string, error)
}

var _ admission.Handler = (*Webhook)(nil)

// Handle judges one create or update.
func (w *Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	s, old, err := strategies(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !NeedsCheck(s, old) {
		return admission.Allowed("")
	}
	value, err := w.Images(ctx)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading ConfigMap %s: %w", w.ConfigMap, err))
	}
	if err := Check(s, value, w.ConfigMap); err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}

// strategies decodes the strategy of the request's Build or BuildConfig,
// and on an update the old object's. The objects are read with OpenShift's
// own types, case-sensitively, as the API server that sent them reads
// JSON.
func strategies(req admission.Request) (s, old *openshiftbuildv1.BuildStrategy, err error) {
	decode := func(raw []byte, what string) (*openshiftbuildv1.BuildStrategy, error) {
		if len(raw) == 0 {
			return nil, fmt.Errorf("the request has no %s", what)
		}
		switch req.Kind.Kind {
		case "Build":
			var b openshiftbuildv1.Build
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &b); err != nil {
				return nil, fmt.Errorf("decoding the %s Build: %w", what, err)
			}
			return &b.Spec.Strategy, nil
		case "BuildConfig":
			var bc openshiftbuildv1.BuildConfig
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &bc); err != nil {
				return nil, fmt.Errorf("decoding the %s BuildConfig: %w", what, err)
			}
			return &bc.Spec.Strategy, nil
		}
		return nil, fmt.Errorf("unexpected kind %s: the webhook judges Builds and BuildConfigs", req.Kind.Kind)
	}
	if s, err = decode(req.Object.Raw, "new"); err != nil {
		return nil, nil, err
	}
	if req.Operation == admissionv1.Update {
		if old, err = decode(req.OldObject.Raw, "old"); err != nil {
			return nil, nil, err
		}
	}
	return s, old, nil
}
