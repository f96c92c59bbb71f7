package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestMetricsNeedAuthorization scrapes build-controller's metrics over
// HTTPS as a service account bound to the shipped ClusterRole
// archway-metrics-reader (200), as one without it (403) and without a token
// (401).
func TestMetricsNeedAuthorization(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "metrics")
	ctx := h.ctx

	var role rbacv1.ClusterRole
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "rbac", "metrics_reader_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &role)).To(Succeed())
	role.Name = "archway-metrics-reader-" + h.ns // each run its own, so nothing is left to collide with
	g.Expect(env.Bed.Client.Create(ctx, &role)).To(Succeed())
	t.Cleanup(func() { _ = env.Bed.Client.Delete(context.Background(), &role) })

	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
		g.Expect(env.Bed.Client.Create(ctx, sa)).To(Succeed())
		tr, err := env.Bed.Clientset.CoreV1().ServiceAccounts(h.ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	reader, other := token("scraper"), token("other")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: h.ns, Name: "scraper"}},
	}
	g.Expect(env.Bed.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.Bed.Client.Delete(context.Background(), binding) })

	// The endpoint's certificate is self-signed (no --metrics-cert-dir).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.MetricsURL, nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(env.MetricsURL).To(HavePrefix("https://"))
	// RBAC reaches the authorizer's cache within moments: the reader's 200
	// is the positive signal before the negative checks.
	g.Eventually(func() int { return scrape(reader) }).WithContext(ctx).Should(Equal(http.StatusOK))
	g.Expect(scrape(other)).To(Equal(http.StatusForbidden), "a token without archway-metrics-reader")
	g.Expect(scrape("")).To(Equal(http.StatusUnauthorized), "no token")
}
