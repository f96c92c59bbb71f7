package operator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/conversion"
	"github.com/archway-build/archway/test/bed"
)

// crdCABundle is the CRD's conversion webhook caBundle, decoded.
func crdCABundle(ctx context.Context) ([]byte, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := k8s.Get(ctx, types.NamespacedName{Name: placement.ClusterPodPlacementConfigCRDName}, crd); err != nil {
		return nil, err
	}
	b64, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	return base64.StdEncoding.DecodeString(b64)
}

// TestConversionCAInjection: the conversion component of the placement
// operator's process writes the CA of its certificate Secret into the CRD
// whose conversion webhook names its Service, as manifests/crd ships it,
// and again when the Secret's CA is renewed.
func TestConversionCAInjection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	// The conversion stanza as manifests/crd patches it in.
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "crd", "placement_conversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped map[string]any
	if err := yaml.Unmarshal(data, &shipped); err != nil {
		t.Fatal(err)
	}
	// The shipped Service, in place of any URL a test set before.
	spec := shipped["spec"].(map[string]any)
	spec["conversion"].(map[string]any)["webhook"].(map[string]any)["clientConfig"].(map[string]any)["url"] = nil
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(placement.ClusterPodPlacementConfigCRDName)
	if err := k8s.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Patch(context.Background(), crd, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)))
	})
	// Two CAs (the apiserver takes only a PEM certificate as a caBundle):
	// the first, then the renewed one.
	var cas [][]byte
	for range 2 {
		ca, err := bed.WriteServingCert(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cas = append(cas, ca)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "archway-placement-operator-tls"},
		Data: map[string][]byte{"ca.crt": cas[0]}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })

	certDir := t.TempDir()
	if _, err := bed.WriteServingCert(certDir); err != nil {
		t.Fatal(err)
	}
	port, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(testBed.Config, ctrl.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := conversion.Setup(mgr, &conversion.CAInjection{
		Secret:  client.ObjectKeyFromObject(secret),
		Service: types.NamespacedName{Namespace: namespace, Name: "archway-placement-operator"},
	}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the manager: %v", err)
		}
	})

	for _, ca := range cas {
		if !bytes.Equal(ca, secret.Data["ca.crt"]) {
			secret.Data["ca.crt"] = ca
			if err := k8s.Update(ctx, secret); err != nil {
				t.Fatal(err)
			}
		}
		var got []byte
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err = crdCABundle(ctx)
			return err == nil && bytes.Equal(got, ca), err
		}); err != nil {
			t.Fatalf("the CRD's caBundle is %q, want the Secret's CA %q: %v", got, ca, err)
		}
	}
}
