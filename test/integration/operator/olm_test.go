package operator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/operator"
)

// olmLabel is the label OLM's Operator object puts on the components of
// the multiarch tuning operator installed in its usual namespace.
const olmLabel = "operators.coreos.com/multiarch-tuning-operator.openshift-multiarch-tuning-operator"

// startOperator runs the placement operator in a manager of its own until
// the test ends.
func startOperator(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(testBed.Config, ctrl.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.Setup(mgr, namespace, prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the operator's manager: %v", err)
		}
	})
}

// patchCRD merge-patches the ClusterPodPlacementConfig CRD's metadata.
func patchCRD(ctx context.Context, labels, annotations map[string]any) error {
	crd := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: placement.ClusterPodPlacementConfigCRDName},
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	if err != nil {
		return err
	}
	return k8s.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch))
}

// setUpOperand creates archway's namespace and the operand's two
// ClusterRoles (the operator binds them), and removes what the operator
// made when the test ends.
func setUpOperand(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, name := range []string{placement.ControllerName, placement.WebhookComponentName} {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := k8s.Create(ctx, role); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
}

// createConfig creates the cluster config, as MTO's user would, and
// deletes it (whatever finalizer holds it) when the test ends.
func createConfig(t *testing.T) {
	t.Helper()
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	if err := k8s.Create(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		key := client.ObjectKeyFromObject(cfg)
		_ = k8s.Delete(ctx, cfg)
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			c := &multiarchv1beta1.ClusterPodPlacementConfig{}
			if err := k8s.Get(ctx, key, c); err != nil {
				return apierrors.IsNotFound(err), nil
			}
			c.Finalizers = nil
			_ = k8s.Update(ctx, c)
			return false, nil
		})
	})
}

// refusalEvent is the operator's Warning event on the CRD, nil until
// recorded.
func refusalEvent(ctx context.Context) (*eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		e := &list.Items[i]
		if e.Reason == operator.EventCRDOwnedByOLM && e.Regarding.Name == placement.ClusterPodPlacementConfigCRDName &&
			e.Regarding.Kind == "CustomResourceDefinition" && e.Type == corev1.EventTypeWarning {
			return e, nil
		}
	}
	return nil, nil
}

// TestRefusesOLMCRDUntilAdopted: on a cluster where OLM installed the
// ClusterPodPlacementConfig CRD (for the multiarch tuning operator), the
// placement operator leaves the config alone (no finalizer, no status, no
// binding of the operand's rights) and says on the CRD what to do; once the
// administrator annotates the CRD for adoption, it runs placement.
func TestRefusesOLMCRDUntilAdopted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	setUpOperand(t)
	if err := patchCRD(ctx, map[string]any{olmLabel: ""}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := patchCRD(context.Background(), map[string]any{olmLabel: nil}, map[string]any{placement.AdoptCRDAnnotation: nil}); err != nil {
			t.Errorf("restoring the CRD: %v", err)
		}
	})
	createConfig(t)
	startOperator(t)

	// The positive signal: the refusal, recorded on the CRD.
	var ev *eventsv1.Event
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		ev, err = refusalEvent(ctx)
		return ev != nil, err
	}); err != nil {
		t.Fatalf("no %s event on the CRD: %v", operator.EventCRDOwnedByOLM, err)
	}
	for _, want := range []string{olmLabel, placement.AdoptCRDAnnotation + "=true", "manifests/crd-without-placement"} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("the event's note %q does not say %q", ev.Note, want)
		}
	}
	// Nothing of MTO's was touched, nothing of archway's started.
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Finalizers) > 0 || len(cfg.Status.Conditions) > 0 {
		t.Errorf("the operator wrote to an OLM-owned config: finalizers %v, conditions %v", cfg.Finalizers, cfg.Status.Conditions)
	}
	for _, name := range []string{placement.ControllerName, placement.WebhookComponentName} {
		err := k8s.Get(ctx, types.NamespacedName{Name: name}, &rbacv1.ClusterRoleBinding{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the operand's binding %s: %v, want none while the CRD is refused", name, err)
		}
	}

	// Adopted: placement runs.
	if err := patchCRD(ctx, nil, map[string]any{placement.AdoptCRDAnnotation: "true"}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg); err != nil {
			return false, err
		}
		for _, name := range []string{placement.ControllerName, placement.WebhookComponentName} {
			if err := k8s.Get(ctx, types.NamespacedName{Name: name}, &rbacv1.ClusterRoleBinding{}); err != nil {
				return false, client.IgnoreNotFound(err)
			}
		}
		return slices.Contains(cfg.Finalizers, placement.OperandFinalizer), nil
	}); err != nil {
		t.Fatalf("after adoption the operator did not run placement: %v (finalizers %v)", err, cfg.Finalizers)
	}
}
