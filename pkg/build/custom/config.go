package custom

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

// Where the custom pod finds build-controller's configuration, the same
// file build-controller and the placement controller read: the ConfigMap
// build-controller-config-<hash> of archway's namespace (manifests/base;
// kustomize's configMapGenerator puts a hash of the content in its name).
// The Role ConfigRole, which grants the Builds' service accounts get on
// that ConfigMap alone, is the one object of a fixed name that names it
// (kustomize writes the generated name into its resourceNames), so the
// custom pod reads the Role first. Neither the Build nor its pod chooses
// the place: both are fixed here, in archway's namespace, which tenants
// cannot write.
const (
	ConfigNamespace = "archway-system"
	ConfigRole      = "archway-custom-builder-config"
	// ConfigKey is the file's key in the ConfigMap (configMapGenerator's
	// file name).
	ConfigKey = "config.yaml"
)

// LoadConfig reads build-controller's configuration, defaulted and
// validated as build-controller reads it, as the service account account
// of namespace ns (the custom pod's). It fails, saying what to bind or
// fix, when it cannot: a custom build never runs on built-in defaults.
func LoadConfig(ctx context.Context, kube kubernetes.Interface, ns, account string) (*configv1alpha1.BuildControllerConfiguration, error) {
	bind := fmt.Sprintf("an administrator binds it to the Build's service account: "+
		"oc -n %s create rolebinding %s-%s --role=%s --serviceaccount=%s:%s",
		ConfigNamespace, ConfigRole, ns, ConfigRole, ns, account)
	wrap := func(what string, err error) error {
		switch {
		case apierrors.IsForbidden(err):
			return fmt.Errorf("reading build-controller's configuration: %s: %w; the Role %s/%s grants that read: %s",
				what, err, ConfigNamespace, ConfigRole, bind)
		case apierrors.IsNotFound(err):
			return fmt.Errorf("reading build-controller's configuration: %s: %w; install manifests/openshift-builds", what, err)
		}
		return fmt.Errorf("reading build-controller's configuration: %s: %w", what, err)
	}
	role, err := kube.RbacV1().Roles(ConfigNamespace).Get(ctx, ConfigRole, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(fmt.Sprintf("Role %s/%s, which names its ConfigMap", ConfigNamespace, ConfigRole), err)
	}
	name, err := ConfigMapName(role)
	if err != nil {
		return nil, fmt.Errorf("reading build-controller's configuration: %w", err)
	}
	cm, err := kube.CoreV1().ConfigMaps(ConfigNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap(fmt.Sprintf("ConfigMap %s/%s", ConfigNamespace, name), err)
	}
	data, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, fmt.Errorf("reading build-controller's configuration: ConfigMap %s/%s has no %s", ConfigNamespace, name, ConfigKey)
	}
	cfg, err := configv1alpha1.Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("build-controller's configuration (ConfigMap %s/%s, %s): %w", ConfigNamespace, name, ConfigKey, err)
	}
	return cfg, nil
}

// ConfigMapName is the ConfigMap the Role grants get on: exactly one,
// named in a rule of the core group on configmaps.
func ConfigMapName(role *rbacv1.Role) (string, error) {
	var names []string
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, corev1.GroupName) && slices.Contains(r.Resources, "configmaps") && slices.Contains(r.Verbs, "get") {
			names = append(names, r.ResourceNames...)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("the Role %s/%s must grant get on exactly one ConfigMap, build-controller's configuration; it names %q", role.Namespace, role.Name, names)
	}
	return names[0], nil
}
