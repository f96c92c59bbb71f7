package conversion

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/archway-build/archway/pkg/placement"
)

// CAInjection is where the serving certificate's CA comes from and which
// Service the CRD must name for it to be written there.
type CAInjection struct {
	// Secret is the certificate Secret build-controller
	// --cert-management=internal fills (its ca.crt).
	Secret types.NamespacedName
	// Service reaches this webhook server.
	Service types.NamespacedName
}

// caKey is the CA in a Secret cert-controller (or cert-manager) fills.
const caKey = "ca.crt"

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// setupCAInjection writes the Secret's CA into the CRD's conversion
// webhook whenever either changes. It is not cert-controller's injection:
// that one watches every CRD of the cluster, whole, in memory (hundreds of
// large schemas on OpenShift); this one watches the Secret and the CRD's
// metadata by name and reads the CRD only when it writes.
func setupCAInjection(mgr ctrl.Manager, o CAInjection) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdGVK)
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.Secret.Namespace: {}}, Field: fields.OneTermEqualSelector("metadata.name", o.Secret.Name)},
			crd:              {Field: fields.OneTermEqualSelector("metadata.name", placement.ClusterPodPlacementConfigCRDName)},
		},
	})
	if err != nil {
		return err
	}
	// Every replica serves the webhook, and each writes the same CA.
	if err := mgr.Add(placement.OnEveryReplica{Cache: c}); err != nil {
		return err
	}
	r := &injector{cache: c, reader: mgr.GetAPIReader(), client: mgr.GetClient(), opts: o}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: placement.ClusterPodPlacementConfigCRDName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("placement-conversion-ca").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(c, client.Object(&corev1.Secret{}), one)).
		WatchesRawSource(source.Kind(c, client.Object(crd), one)).
		Complete(r)
}

// injector writes the CA into the CRD.
type injector struct {
	cache  client.Reader // the Secret and the CRD's metadata
	reader client.Reader // the whole CRD, from the apiserver
	client client.Client
	opts   CAInjection
}

func (r *injector) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	if err := r.cache.Get(ctx, r.opts.Secret, secret); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ca := secret.Data[caKey]
	if len(ca) == 0 {
		return ctrl.Result{}, nil // not filled yet: its update comes back here
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := r.reader.Get(ctx, types.NamespacedName{Name: placement.ClusterPodPlacementConfigCRDName}, crd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patch, skip, err := caBundlePatch(crd, r.opts.Service, ca)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case skip != "":
		log.FromContext(ctx).V(1).Info("leaving the CRD's CA bundle alone: " + skip)
		return ctrl.Result{}, nil
	case patch == nil:
		return ctrl.Result{}, nil
	}
	if err := r.client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("build-controller")); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the CA into the CRD %s: %w", crd.GetName(), err)
	}
	log.FromContext(ctx).Info("wrote the conversion webhook's CA into the CRD", "crd", crd.GetName())
	return ctrl.Result{}, nil
}

// caBundlePatch is the merge patch that sets the CRD's conversion webhook
// CA bundle to ca, nil when it already holds it. skip says why the CRD is
// left alone: another operator's conversion webhook (it names another
// Service, or OLM installed it and nobody adopted it for archway) keeps its
// own CA.
func caBundlePatch(crd *unstructured.Unstructured, service types.NamespacedName, ca []byte) (patch []byte, skip string, err error) {
	if why := placement.CRDRefusal(crd); why != "" {
		return nil, why, nil
	}
	strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
	if strategy != "Webhook" {
		return nil, fmt.Sprintf("its conversion strategy is %q, not Webhook", strategy), nil
	}
	name, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
	namespace, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
	if name != service.Name || namespace != service.Namespace {
		return nil, fmt.Sprintf("its conversion webhook is the Service %s/%s, not %s", namespace, name, service), nil
	}
	current, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	if decoded, err := base64.StdEncoding.DecodeString(current); err == nil && bytes.Equal(decoded, ca) {
		return nil, "", nil
	}
	patch, err = json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{
		"clientConfig": map[string]any{"caBundle": base64.StdEncoding.EncodeToString(ca)}}}}})
	return patch, "", err
}
