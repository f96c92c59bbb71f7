package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestValueFrom: a build arg from a Secret key and an env variable from a
// ConfigMap key reach the build (the RUN step writes them into the image)
// through the build pods' own valueFrom: the pods' specs name the keys and
// hold no value, so build-controller never read the Secret.
func TestValueFrom(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "valuefrom")
	const token = "s3cret-t0ken-value"
	for _, o := range []interface{ GetName() string }{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "creds"}, StringData: map[string]string{"token": token}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "settings"}, Data: map[string]string{"mode": "fast"}},
	} {
		switch v := o.(type) {
		case *corev1.Secret:
			g.Expect(env.Bed.Client.Create(h.ctx, v)).To(Succeed())
		case *corev1.ConfigMap:
			g.Expect(env.Bed.Client.Create(h.ctx, v)).To(Succeed())
		}
	}
	platforms := []string{"linux/amd64", "linux/arm64"}
	bc := h.buildConfig("FROM "+env.Bed.BaseImage+"\nARG TOKEN\nRUN echo \"$TOKEN $MODE\" > /values\n", platforms, nil)
	bc.Spec.Strategy.DockerStrategy.BuildArgs = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}}}
	bc.Spec.Strategy.DockerStrategy.Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}}
	g.Expect(env.Bed.Client.Update(h.ctx, bc)).To(Succeed())
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	values, err := indexChildren(h.ctx, h.output(), "/values")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(values).To(Equal(map[string]string{"linux/amd64": token + " fast", "linux/arm64": token + " fast"}))

	for name, pod := range h.pods() {
		spec, err := json.Marshal(pod.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Contains(string(spec), token)).To(BeFalse(), "pod %s holds the Secret's value", name)
	}
}
