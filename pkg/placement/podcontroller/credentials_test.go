package podcontroller

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mapReader answers Get for secrets and service accounts from a map and
// counts the reads.
type mapReader struct {
	client.Reader
	objects map[types.NamespacedName]client.Object
	reads   int
}

func (m *mapReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	m.reads++
	o, ok := m.objects[key]
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	switch dst := obj.(type) {
	case *corev1.Secret:
		s, ok := o.(*corev1.Secret)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
		}
		s.DeepCopyInto(dst)
	case *corev1.ServiceAccount:
		sa, ok := o.(*corev1.ServiceAccount)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("serviceaccounts"), key.Name)
		}
		sa.DeepCopyInto(dst)
	}
	return nil
}

func pullSecret(ns, name, host string) *corev1.Secret {
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{
		host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("user:" + name))},
	}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
}

func TestPullSecretsReadTheAPIServerOnlyForNamedSecrets(t *testing.T) {
	global := types.NamespacedName{Namespace: "openshift-config", Name: "pull-secret"}
	fresh := pullSecret("app", "fresh", "registry.example.com")
	cases := []struct {
		name        string
		pod         *corev1.Pod
		apiserver   map[types.NamespacedName]client.Object
		wantReads   int  // reads of the apiserver
		wantAuthFor bool // registry.example.com has credentials
	}{
		{"no secret named, no global secret anywhere: no apiserver read",
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app"}}, nil, 0, false},
		{"a named secret the caches do not hold yet is read from the apiserver",
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app"}, Spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "fresh"}}}},
			map[types.NamespacedName]client.Object{{Namespace: "app", Name: "fresh"}: fresh}, 1, true},
		{"a named secret that exists nowhere costs one read",
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app"}, Spec: corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "missing"}}}},
			nil, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			direct := &mapReader{objects: tc.apiserver}
			p := pullSecrets{cached: &mapReader{}, legacy: &mapReader{}, direct: direct, global: global}
			k, err := p.keyring(context.Background(), tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if direct.reads != tc.wantReads {
				t.Errorf("%d apiserver reads, want %d", direct.reads, tc.wantReads)
			}
			if got := len(k.Lookup("registry.example.com/team/app:1")) > 0; got != tc.wantAuthFor {
				t.Errorf("credentials for registry.example.com: %v, want %v", got, tc.wantAuthFor)
			}
		})
	}
}
