// Package custombuilds is the rule that makes OpenShift's Custom strategy
// safe to grant for archway alone. A custom builder runs its image as a
// privileged pod, which is why OpenShift grants builds/custom
// (system:build-strategy-custom) to no one by default; under this rule a
// Custom-strategy Build or BuildConfig is admitted only when its builder
// image is archway's, by digest, it does not expose the node's Docker
// socket, its env does not replace what OpenShift sets on the custom pod
// (ReservedEnv) and it mounts no secrets into that pod, so an
// administrator may grant the strategy to tenants.
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
	corev1 "k8s.io/api/core/v1"
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

// ReservedEnv are the variables OpenShift's build controller sets on a
// custom builder's pod, and those archway's custom builder reads from its
// own environment. OpenShift appends the strategy's env after its own, so a
// strategy variable of one of these names replaces OpenShift's value: the
// custom builder would then read a Build (BUILD), a registry policy or
// credentials OpenShift did not make, and run the platforms' pods from any
// image. The strategy may not set them. (PULL_SOURCE_DOCKERCFG_PATH_<n>,
// one per source image, is refused by reservedEnvPrefix.)
// OPENSHIFT_CUSTOM_BUILD_BASE_IMAGE is not among them: openshift-apiserver
// writes it into the strategy's env of each Build it starts (the builder
// image), and the custom builder does not read it.
var ReservedEnv = []string{
	"BUILD", "LANG", "DOCKER_SOCKET",
	"SOURCE_REPOSITORY", "SOURCE_URI", "SOURCE_CONTEXT_DIR", "SOURCE_REF", "SOURCE_SECRET_PATH",
	"OUTPUT_REGISTRY", "OUTPUT_IMAGE", "PUSH_DOCKERCFG_PATH", "PULL_DOCKERCFG_PATH",
	"BUILD_REGISTRIES_CONF_PATH", "BUILD_REGISTRIES_DIR_PATH", "BUILD_SIGNATURE_POLICY_PATH",
	"BUILD_STORAGE_CONF_PATH", "BUILD_STORAGE_DRIVER", "BUILD_BLOBCACHE_DIR", "BUILD_MOUNT_ETC_PKI_CATRUST", "BUILD_ISOLATION",
	"POD_NAME", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
}

const reservedEnvPrefix = "PULL_SOURCE_DOCKERCFG_PATH_"

// reserved returns the names of env that ReservedEnv holds, in order.
func reserved(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		if slices.Contains(ReservedEnv, e.Name) || strings.HasPrefix(e.Name, reservedEnvPrefix) {
			out = append(out, e.Name)
		}
	}
	return out
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
	var env []corev1.EnvVar
	secrets := 0
	if c := s.CustomStrategy; c != nil {
		kind, name, expose, env, secrets = c.From.Kind, c.From.Name, c.ExposeDockerSocket, c.Env, len(c.Secrets)
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
	if names := reserved(env); len(names) > 0 {
		errs = append(errs, fmt.Errorf("spec.strategy.customStrategy.env: %s would replace what OpenShift sets on the custom builder's pod: "+
			"remove them (archway's own variables are PLATFORMS, PLATFORMS_ALLOWED_TO_FAIL, DOCKERFILE_PATH and BUILD_ARG_<name>)", strings.Join(names, ", ")))
	}
	if secrets > 0 {
		errs = append(errs, errors.New("spec.strategy.customStrategy.secrets are mounted into the custom builder's pod only, not into the platforms' build pods: use source.secrets"))
	}
	return errors.Join(errs...)
}
