package custom

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/registry"
)

// The variables OpenShift's build controller sets in every build pod it
// makes, the custom pod too: the paths of the cluster's registries.conf
// (the mirrors of ImageContentSourcePolicies, the image config's insecure
// and blocked registries) and policy.json (its allowedRegistries), which it
// writes into the Build's <build>-sys-config ConfigMap and mounts
// read-only. A file is absent when the cluster configures nothing of it.
const (
	RegistriesConfPathEnv  = "BUILD_REGISTRIES_CONF_PATH"
	SignaturePolicyPathEnv = "BUILD_SIGNATURE_POLICY_PATH"
)

// ClusterRegistries reads the cluster's registry configuration OpenShift
// hands the custom pod (getenv is os.Getenv): the registries.conf the
// platform pods are given, as build-controller gives its own, and the only
// registry scopes images may come from (none: every registry). A file that
// is there but does not parse fails the build before any pod, naming it.
func ClusterRegistries(getenv func(string) string) (conf string, allowed []string, err error) {
	if path := getenv(RegistriesConfPathEnv); path != "" {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return "", nil, fmt.Errorf("the cluster's registries.conf ($%s): %w", RegistriesConfPathEnv, err)
		default:
			if _, err := registry.ParseConf(string(data)); err != nil {
				return "", nil, fmt.Errorf("the cluster's registries.conf %s ($%s): %w", path, RegistriesConfPathEnv, err)
			}
			conf = string(data)
		}
	}
	if path := getenv(SignaturePolicyPathEnv); path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return conf, nil, nil
		}
		scopes, restricted, err := registry.PolicyAllowed(path)
		switch {
		case err != nil:
			return "", nil, fmt.Errorf("the cluster's policy.json ($%s): %w", SignaturePolicyPathEnv, err)
		case restricted && len(scopes) == 0:
			return "", nil, fmt.Errorf("the cluster's policy.json %s ($%s) allows images from no registry: "+
				"ask an administrator to list the registries builds may use in the image config's allowedRegistries", path, SignaturePolicyPathEnv)
		case restricted:
			allowed = scopes
		}
	}
	return conf, allowed, nil
}

// PodRegistryCAs is the ConfigMap of registry CAs OpenShift's build
// controller mounted into the custom pod ns/name at
// controller.RegistryCAsMountDir: the Build's <build>-ca ConfigMap, whose
// items put the internal registry's service CA and each of the image
// config's additionalTrustedCA (keys host or host..port) at
// certs.d/<host[:port]>/ca.crt. Nil when the pod mounts none there. The
// platforms' pods mount the same ConfigMap with the same items, so that
// they trust what OpenShift's own build pods trust.
func PodRegistryCAs(ctx context.Context, kube kubernetes.Interface, ns, name string) (*corev1.ConfigMapVolumeSource, error) {
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the custom pod %s/%s for the registry CAs OpenShift mounts into it: %w", ns, name, err)
	}
	var volume string
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == controller.RegistryCAsMountDir {
				volume = m.Name
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			return v.ConfigMap.DeepCopy(), nil
		}
	}
	return nil, nil
}
