package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// The rules between objects that no CRD schema can hold, as seed 001 sets
// them: a PodPlacementConfig needs the ClusterPodPlacementConfig, its
// priority is unique in its namespace, and the ClusterPodPlacementConfig
// cannot be deleted while PodPlacementConfigs exist. Served by the
// placement webhook component (ValidatingWebhookConfiguration
// archway-pod-placement-validation), from informer caches.

// Validation webhook paths.
const (
	PodPlacementConfigValidationPath        = "/validate-multiarch-openshift-io-v1beta1-podplacementconfig"
	ClusterPodPlacementConfigValidationPath = "/validate-multiarch-openshift-io-v1beta1-clusterpodplacementconfig"
)

// validatePodPlacementConfig checks c against the cluster config (nil when
// none exists) and the other configs of its namespace.
func validatePodPlacementConfig(c *multiarchv1beta1.PodPlacementConfig, cluster *multiarchv1beta1.ClusterPodPlacementConfig, namespace []multiarchv1beta1.PodPlacementConfig) error {
	if cluster == nil || cluster.DeletionTimestamp != nil {
		return fmt.Errorf("a PodPlacementConfig needs the ClusterPodPlacementConfig %q: create it first", multiarchv1beta1.ClusterPodPlacementConfigName)
	}
	for _, o := range namespace {
		if o.Name != c.Name && o.Spec.Priority == c.Spec.Priority && o.DeletionTimestamp == nil {
			return fmt.Errorf("spec.priority: PodPlacementConfig %s in namespace %s already has priority %d; priorities are unique within a namespace",
				o.Name, c.Namespace, c.Spec.Priority)
		}
	}
	return nil
}

// validateClusterConfigDeletion refuses to delete the cluster config while
// namespace configs depend on it.
func validateClusterConfigDeletion(local []multiarchv1beta1.PodPlacementConfig) error {
	if len(local) == 0 {
		return nil
	}
	return fmt.Errorf("the ClusterPodPlacementConfig cannot be deleted while %d PodPlacementConfigs exist (e.g. %s/%s): delete them first",
		len(local), local[0].Namespace, local[0].Name)
}

// podPlacementConfigValidator serves validatePodPlacementConfig against
// its cache (quick, with a message naming the other config), then makes
// the config hold the claim of its priority, which concurrent creates
// cannot both get.
type podPlacementConfigValidator struct {
	cache  client.Reader
	claims placement.PriorityClaims
}

var _ admission.Validator[*multiarchv1beta1.PodPlacementConfig] = podPlacementConfigValidator{}

func (v podPlacementConfigValidator) ValidateCreate(ctx context.Context, c *multiarchv1beta1.PodPlacementConfig) (admission.Warnings, error) {
	return nil, v.validate(ctx, c)
}

func (v podPlacementConfigValidator) ValidateUpdate(ctx context.Context, _, c *multiarchv1beta1.PodPlacementConfig) (admission.Warnings, error) {
	if c.DeletionTimestamp != nil {
		return nil, nil // finalizers may change while it goes
	}
	return nil, v.validate(ctx, c)
}

func (v podPlacementConfigValidator) ValidateDelete(context.Context, *multiarchv1beta1.PodPlacementConfig) (admission.Warnings, error) {
	return nil, nil
}

func (v podPlacementConfigValidator) validate(ctx context.Context, c *multiarchv1beta1.PodPlacementConfig) error {
	var cluster *multiarchv1beta1.ClusterPodPlacementConfig
	cppc := &multiarchv1beta1.ClusterPodPlacementConfig{}
	switch err := v.cache.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cppc); {
	case err == nil:
		cluster = cppc
	case !apierrors.IsNotFound(err):
		return err
	}
	others := &multiarchv1beta1.PodPlacementConfigList{}
	if err := v.cache.List(ctx, others, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	if err := validatePodPlacementConfig(c, cluster, others.Items); err != nil {
		return err
	}
	dryRun := false
	if req, err := admission.RequestFromContext(ctx); err == nil {
		dryRun = req.DryRun != nil && *req.DryRun
	}
	return v.claims.Claim(ctx, c, dryRun)
}

// clusterConfigValidator serves validateClusterConfigDeletion.
type clusterConfigValidator struct{ cache client.Reader }

var _ admission.Validator[*multiarchv1beta1.ClusterPodPlacementConfig] = clusterConfigValidator{}

func (v clusterConfigValidator) ValidateCreate(context.Context, *multiarchv1beta1.ClusterPodPlacementConfig) (admission.Warnings, error) {
	return nil, nil
}

func (v clusterConfigValidator) ValidateUpdate(context.Context, *multiarchv1beta1.ClusterPodPlacementConfig, *multiarchv1beta1.ClusterPodPlacementConfig) (admission.Warnings, error) {
	return nil, nil
}

func (v clusterConfigValidator) ValidateDelete(ctx context.Context, _ *multiarchv1beta1.ClusterPodPlacementConfig) (admission.Warnings, error) {
	local := &multiarchv1beta1.PodPlacementConfigList{}
	if err := v.cache.List(ctx, local, client.Limit(1)); err != nil {
		return nil, err
	}
	return nil, validateClusterConfigDeletion(local.Items)
}
