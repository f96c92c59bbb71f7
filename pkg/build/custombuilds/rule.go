// Package custombuilds is the rule that makes OpenShift's Custom strategy
// safe to grant for archway alone. A custom builder runs its image as a
// privileged pod, which is why OpenShift grants builds/custom
// (system:build-strategy-custom) to no one by default; under this rule a
// Custom-strategy Build or BuildConfig is admitted only when its builder
// image is archway's, by digest, and it does not expose the node's Docker
// socket, so an administrator may grant the strategy to tenants.
//
// openshift-apiserver, which serves build.openshift.io on OpenShift, calls
// admission webhooks but evaluates no ValidatingAdmissionPolicy: the rule
// is served as a validating webhook (build-controller's
// custom-builds-webhook component, manifests/openshift-builds). The same
// rule is also shipped as the ValidatingAdmissionPolicy
// archway-custom-builds, for API servers that evaluate policies; the two
// refuse with the same messages.
package custombuilds

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	openshiftbuildv1 "github.com/openshift/api/build/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// The ConfigMap that names the builder images admitted, in the namespace of
// the webhook's pods (archway-system), and its key: one image or several,
// comma-separated (several during an upgrade). Only entries by digest
// count.
const (
	ConfigMapName = "archway-custom-builder"
	ImageKey      = "image"
)

// customType is OpenShift's strategy type of a custom builder.
const customType = openshiftbuildv1.CustomBuildStrategyType

// AllowedImages returns the builder images a ConfigMap's image value
// admits: its comma-separated entries, trimmed, that name an image by
// digest.
func AllowedImages(value string) []string {
	var out []string
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "@sha256:") {
			out = append(out, s)
		}
	}
	return out
}

// IsCustom reports whether s is a custom builder's strategy: of type
// Custom, or carrying a customStrategy under another type (OpenShift runs
// the custom builder for either).
func IsCustom(s *openshiftbuildv1.BuildStrategy) bool {
	return s.Type == customType || s.CustomStrategy != nil
}

// NeedsCheck reports whether a write of strategy s, replacing old (nil on
// a create), is judged: every create of a custom builder, and the updates
// that change the strategy. An update that leaves the strategy as it was
// (OpenShift's build controller moving a Build's phase; a BuildConfig's
// source or triggers edited) is admitted whatever the ConfigMap says now,
// so that narrowing the images admitted stops new builds of an old image,
// never the ones running. The policy's matchConditions say the same.
func NeedsCheck(s, old *openshiftbuildv1.BuildStrategy) bool {
	if !IsCustom(s) {
		return false
	}
	return old == nil || !equality.Semantic.DeepEqual(s, old)
}

// Check judges a custom builder's strategy against the images the
// ConfigMap's image value admits (AllowedImages); configMap names the
// ConfigMap, for the message. It returns nil for a strategy that is not a
// custom builder's.
func Check(s *openshiftbuildv1.BuildStrategy, images, configMap string) error {
	if !IsCustom(s) {
		return nil
	}
	allowed := AllowedImages(images)
	var kind, name string
	expose := false
	if c := s.CustomStrategy; c != nil {
		kind, name, expose = c.From.Kind, c.From.Name, c.ExposeDockerSocket
	}
	var errs []error
	if kind != "DockerImage" || !slices.Contains(allowed, name) {
		which := strings.Join(allowed, ", ")
		if len(allowed) == 0 {
			which = "none is configured in ConfigMap " + configMap
		}
		errs = append(errs, fmt.Errorf("spec.strategy.customStrategy.from: a Custom-strategy build may run only archway's builder image, by digest (%s), not %s %s", which, kind, name))
	}
	if expose {
		errs = append(errs, errors.New("spec.strategy.customStrategy.exposeDockerSocket is refused: archway's builder needs no Docker socket"))
	}
	return errors.Join(errs...)
}
