package e2e

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// TestServiceAccountPullSecrets: a Build that names no push and no pull
// secret pulls its base image from, and pushes its two platforms and their
// index to, the bed's registry that requires a password, with the builder
// service account's image pull secrets, as OpenShift uses the builder
// account's docker secrets. The account lists a secret that is no docker
// config first: it is passed over. Without the account's secrets the base
// image's pull is refused and the Build fails.
func TestServiceAccountPullSecrets(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "sapull")
	reg := env.Bed.AuthRegistry
	base, err := bed.SeedBaseImage(h.ctx, reg)
	g.Expect(err).NotTo(HaveOccurred())
	config, err := json.Marshal(map[string]any{"auths": map[string]any{
		reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "other"}, Type: corev1.SecretTypeOpaque, StringData: map[string]string{"token": "x"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: config}},
	} {
		g.Expect(env.Bed.Client.Create(h.ctx, s)).To(Succeed())
	}
	g.Expect(env.Bed.Client.Create(h.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "builder"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "other"}, {Name: "missing"}, {Name: "registry"}}})).To(Succeed())

	platforms := []string{"linux/amd64", "linux/arm64"}
	bc := h.buildConfigSpec(machineDockerfile(base), platforms, nil)
	output := reg.Host + "/" + h.repo + ":v1"
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: output}
	h.create(bc)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	img, err := reg.OpenImage(h.ctx, output)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(h.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Manifests).To(HaveLen(2))
}
