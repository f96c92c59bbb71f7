package podcontroller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/pkg/placement/image"
)

// pullSecrets finds the credentials a kubelet would use for a pod's images:
// the pod's imagePullSecrets, then its service account's (which the
// ServiceAccount admission plugin would have copied into the pod when the
// pod named none), then the global pull secret. Secrets that do not exist
// or are not docker configs are skipped, as the kubelet skips them.
//
// Secrets are read from informer caches. Only a secret the pod or its
// service account names and the caches do not hold (yet: one created just
// before the pod) is read from the apiserver; the global pull secret never
// is, so a cluster without one costs no read per pod.
type pullSecrets struct {
	// cached reads service accounts and kubernetes.io/dockerconfigjson
	// secrets.
	cached client.Reader
	// legacy reads kubernetes.io/dockercfg secrets (a cache of its own: an
	// informer watches one secret type).
	legacy client.Reader
	// direct reads from the apiserver; nil: never.
	direct client.Reader
	global types.NamespacedName
}

// keyring returns the pod's credentials.
func (p pullSecrets) keyring(ctx context.Context, pod *corev1.Pod) (*image.Keyring, error) {
	var refs []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	add := func(ns string, names ...corev1.LocalObjectReference) {
		for _, n := range names {
			key := types.NamespacedName{Namespace: ns, Name: n.Name}
			if n.Name != "" && !seen[key] {
				seen[key] = true
				refs = append(refs, key)
			}
		}
	}
	add(pod.Namespace, pod.Spec.ImagePullSecrets...)
	saName := pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	sa := &corev1.ServiceAccount{}
	switch err := p.cached.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: saName}, sa); {
	case err == nil:
		add(pod.Namespace, sa.ImagePullSecrets...)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading service account %s/%s: %w", pod.Namespace, saName, err)
	}
	named := len(refs)
	if p.global.Name != "" && !seen[p.global] {
		refs = append(refs, p.global)
	}
	k := &image.Keyring{}
	for i, ref := range refs {
		secret, err := p.secret(ctx, ref, i < named)
		if err != nil {
			return nil, err
		}
		if secret == nil {
			continue
		}
		switch {
		case secret.Type == corev1.SecretTypeDockerConfigJson && len(secret.Data[corev1.DockerConfigJsonKey]) > 0:
			err = k.AddDockerConfigJSON(secret.Data[corev1.DockerConfigJsonKey])
		case secret.Type == corev1.SecretTypeDockercfg && len(secret.Data[corev1.DockerConfigKey]) > 0:
			err = k.AddDockercfg(secret.Data[corev1.DockerConfigKey])
		}
		if err != nil {
			// A broken secret is the user's to fix; the kubelet ignores it too.
			continue
		}
	}
	return k, nil
}

// secret reads one docker config secret, nil when none exists (or the
// secret is of another type); from the apiserver too when named and the
// caches do not hold it.
func (p pullSecrets) secret(ctx context.Context, ref types.NamespacedName, named bool) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := p.cached.Get(ctx, ref, secret)
	if apierrors.IsNotFound(err) && p.legacy != nil {
		err = p.legacy.Get(ctx, ref, secret)
	}
	if apierrors.IsNotFound(err) && named && p.direct != nil {
		err = p.direct.Get(ctx, ref, secret)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading pull secret %s: %w", ref, err)
	}
	return secret, nil
}
