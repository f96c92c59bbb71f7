package placement

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	multiarchv1alpha1 "github.com/archway-build/archway/pkg/apis/multiarch/v1alpha1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	placementconversion "github.com/archway-build/archway/pkg/placement/conversion"
	"github.com/archway-build/archway/test/bed"
)

// enableConversion gives the ClusterPodPlacementConfig CRD the conversion
// stanza manifests/crd patches in, pointed at the suite's webhook server
// (the bed has no Service routing, so a URL with the suite's CA, as envtest
// does for conversion webhooks), and waits until v1alpha1 is served
// through it.
func enableConversion(ctx context.Context) error {
	stanza, err := shippedConversion()
	if err != nil {
		return err
	}
	svc, _ := stanza["webhook"].(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
	if svc["name"] != "archway-placement-operator" || svc["path"] != placementconversion.Path {
		return fmt.Errorf("manifests/crd's conversion webhook is %v: not the placement operator's Service and %s", svc, placementconversion.Path)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": stanza["webhook"].(map[string]any)["conversionReviewVersions"],
			"clientConfig": map[string]any{
				"url":      webhooks.URL + placementconversion.Path,
				"caBundle": base64.StdEncoding.EncodeToString(webhooks.CA),
			},
		},
	}}})
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(placement.ClusterPodPlacementConfigCRDName)
	if err := k8s.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("enabling the CRD's conversion webhook: %w", err)
	}
	// The apiserver serves the new conversion once it has reloaded the
	// CRD: a v1alpha1 list goes through it (a config may exist).
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return k8s.List(ctx, &multiarchv1alpha1.ClusterPodPlacementConfigList{}) == nil, nil
	})
}

// shippedConversion is spec.conversion as manifests/crd's patch writes it.
func shippedConversion() (map[string]any, error) {
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "crd", "placement_conversion.yaml"))
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Conversion map[string]any `json:"conversion"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	if crd.Spec.Conversion["strategy"] != "Webhook" {
		return nil, fmt.Errorf("manifests/crd/placement_conversion.yaml: strategy %v", crd.Spec.Conversion["strategy"])
	}
	return crd.Spec.Conversion, nil
}

// MTO's manifests, as its documentation and samples write them.
const (
	mtoV1alpha1Config = `apiVersion: multiarch.openshift.io/v1alpha1
kind: ClusterPodPlacementConfig
metadata:
  name: cluster
spec:
  logVerbosity: Normal
  namespaceSelector:
    matchExpressions:
    - key: multiarch.openshift.io/exclude-pod-placement
      operator: DoesNotExist
`
	mtoV1beta1Config = `apiVersion: multiarch.openshift.io/v1beta1
kind: ClusterPodPlacementConfig
metadata:
  name: cluster
spec:
  logVerbosity: Normal
  fallbackArchitecture: arm64
  namespaceSelector:
    matchExpressions:
    - key: multiarch.openshift.io/exclude-pod-placement
      operator: DoesNotExist
  plugins:
    nodeAffinityScoring:
      enabled: true
      platforms:
      - architecture: arm64
        weight: 50
`
)

func unstructuredFrom(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestMTOConfigThroughConversion: MTO's own v1alpha1 and v1beta1
// ClusterPodPlacementConfig manifests apply unchanged through the real
// apiserver, each reads back in the other version (the apiserver calling
// the conversion webhook), placement honours the config created through
// v1alpha1, and a v1alpha1 client that reads and writes the config keeps
// the v1beta1 fields v1alpha1 lacks.
func TestMTOConfigThroughConversion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := deleteConfig(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := deleteConfig(context.Background()); err != nil {
			t.Errorf("deleting the MTO config: %v", err)
		}
		if err := applyConfig(context.Background(), multiarchv1beta1.ClusterPodPlacementConfigSpec{}); err != nil {
			t.Errorf("restoring the default config: %v", err)
		}
	})
	key := types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}

	// MTO's v1alpha1 manifest, created as it is.
	if err := k8s.Create(ctx, unstructuredFrom(t, mtoV1alpha1Config)); err != nil {
		t.Fatalf("creating MTO's v1alpha1 config: %v", err)
	}
	// Read in v1beta1: the stored object, as placement reads it.
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	if err := bed.WaitFor(ctx, k8s, key, cfg, func(c *multiarchv1beta1.ClusterPodPlacementConfig) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, multiarchv1beta1.ConditionAvailable)
	}); err != nil {
		t.Fatalf("the v1alpha1-created config never became Available in v1beta1: %v (%+v)", err, cfg.Status)
	}
	sel := cfg.Spec.NamespaceSelector
	if cfg.Spec.LogVerbosity != multiarchv1beta1.LogVerbosityNormal || sel == nil || len(sel.MatchExpressions) != 1 ||
		sel.MatchExpressions[0].Key != placement.ExcludeNamespaceLabel || cfg.Spec.FallbackArchitecture != "" || cfg.Spec.Plugins != nil {
		t.Errorf("v1beta1 view of MTO's v1alpha1 config: %+v", cfg.Spec)
	}
	for k := range cfg.Annotations {
		if k == multiarchv1alpha1.FallbackArchitectureAnnotation || k == multiarchv1alpha1.V1beta1FieldsAnnotation {
			t.Errorf("the stored config has the conversion's annotation %s", k)
		}
	}

	// Placement honours it: the webhook's cache has it, and a pod of an
	// opted-out namespace is left alone while one of another is placed.
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		seen := &multiarchv1beta1.ClusterPodPlacementConfig{}
		return webhookMgr.GetCache().Get(ctx, key, seen) == nil && seen.Generation >= cfg.Generation, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := waitHeartbeatSeen(ctx); err != nil {
		t.Fatal(err)
	}
	in := newHarness(t, "mto-selected", nil)
	out := newHarness(t, "mto-excluded", map[string]string{placement.ExcludeNamespaceLabel: ""})
	placed := in.create(makePod(in.ns, "placed").image(imgAMD64Only).obj())
	if !gated(placed) {
		t.Error("a pod of a namespace MTO's selector selects was not gated")
	}
	left := out.create(makePod(out.ns, "left").image(imgAMD64Only).obj())
	if gated(left) {
		t.Errorf("a pod of a namespace labelled %s was gated", placement.ExcludeNamespaceLabel)
	}
	if arch := in.waitBound("placed"); arch != "amd64" {
		t.Errorf("placed: bound to %s, want amd64, its image's only architecture", arch)
	}

	// Read in v1alpha1: the status placement wrote comes through.
	alpha := &multiarchv1alpha1.ClusterPodPlacementConfig{}
	if err := k8s.Get(ctx, key, alpha); err != nil {
		t.Fatalf("reading the config as v1alpha1: %v", err)
	}
	// (The defaulted preferenceMerge and the observedGeneration ride in
	// the fields annotation.)
	_, fallback := alpha.Annotations[multiarchv1alpha1.FallbackArchitectureAnnotation]
	if alpha.Spec.LogVerbosity != "Normal" || alpha.Spec.NamespaceSelector == nil || fallback ||
		strings.Contains(alpha.Annotations[multiarchv1alpha1.V1beta1FieldsAnnotation], "plugins") ||
		!meta.IsStatusConditionTrue(alpha.Status.Conditions, multiarchv1beta1.ConditionAvailable) {
		t.Errorf("v1alpha1 view: annotations %v, spec %+v, status %+v", alpha.Annotations, alpha.Spec, alpha.Status)
	}

	// MTO's v1beta1 manifest over it, with the fields v1alpha1 lacks.
	// (Updates retry on conflicts: the controllers write the config too.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		beta := unstructuredFrom(t, mtoV1beta1Config)
		if err := k8s.Get(ctx, key, cfg); err != nil {
			return err
		}
		beta.SetResourceVersion(cfg.ResourceVersion)
		beta.SetFinalizers(cfg.Finalizers)
		return k8s.Update(ctx, beta)
	}); err != nil {
		t.Fatalf("applying MTO's v1beta1 config: %v", err)
	}
	// A v1alpha1 client reads it, changes what it knows, writes it back.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, key, alpha); err != nil {
			return err
		}
		if alpha.Annotations[multiarchv1alpha1.FallbackArchitectureAnnotation] != "arm64" ||
			!strings.Contains(alpha.Annotations[multiarchv1alpha1.V1beta1FieldsAnnotation], `"weight":50`) {
			t.Errorf("v1alpha1 view of MTO's v1beta1 config: annotations %v", alpha.Annotations)
		}
		alpha.Spec.LogVerbosity = "Debug"
		return k8s.Update(ctx, alpha)
	}); err != nil {
		t.Fatalf("updating through v1alpha1: %v", err)
	}
	if err := k8s.Get(ctx, key, cfg); err != nil {
		t.Fatal(err)
	}
	scoring := cfg.Spec.Plugins
	if cfg.Spec.LogVerbosity != multiarchv1beta1.LogVerbosityDebug || cfg.Spec.FallbackArchitecture != "arm64" || scoring == nil ||
		scoring.NodeAffinityScoring == nil || len(scoring.NodeAffinityScoring.Platforms) != 1 || scoring.NodeAffinityScoring.Platforms[0].Weight != 50 {
		t.Errorf("after a v1alpha1 update, v1beta1 reads %+v: the fields v1alpha1 lacks must survive", cfg.Spec)
	}
	if _, ok := cfg.Annotations[multiarchv1alpha1.V1beta1FieldsAnnotation]; ok {
		t.Errorf("the stored config kept the annotation %s", multiarchv1alpha1.V1beta1FieldsAnnotation)
	}

	// A v1alpha1 write whose annotation v1beta1's schema would refuse is
	// refused, and changes nothing.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, key, alpha); err != nil {
			return err
		}
		alpha.Annotations[multiarchv1alpha1.FallbackArchitectureAnnotation] = "mips64"
		return k8s.Update(ctx, alpha)
	})
	if err == nil || !strings.Contains(err.Error(), multiarchv1alpha1.FallbackArchitectureAnnotation) || !strings.Contains(err.Error(), "mips64") {
		t.Errorf("a v1alpha1 update with fallback architecture mips64: %v, want a refusal naming the annotation", err)
	}
	if err := k8s.Get(ctx, key, cfg); err != nil || cfg.Spec.FallbackArchitecture != "arm64" {
		t.Errorf("after the refused update: %v, fallbackArchitecture %q", err, cfg.Spec.FallbackArchitecture)
	}
}
