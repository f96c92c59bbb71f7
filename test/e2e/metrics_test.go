package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// metricsReader makes a service account of h's namespace bound to a copy of
// the shipped ClusterRole archway-metrics-reader, and returns its token and
// the token of another service account without that role.
func metricsReader(t *testing.T, h *harness) (reader, other string) {
	g := NewWithT(t)
	ctx := h.ctx
	var role rbacv1.ClusterRole
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "base", "rbac", "metrics_reader_role.yaml"))
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
	reader, other = token("scraper"), token("other")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: h.ns, Name: "scraper"}},
	}
	g.Expect(env.Bed.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.Bed.Client.Delete(context.Background(), binding) })
	return reader, other
}

// scrapeMetrics GETs build-controller's metrics with token ("" for none)
// and returns the status code and the body.
func scrapeMetrics(ctx context.Context, t *testing.T, token string) (int, []byte) {
	t.Helper()
	// The endpoint's certificate is self-signed (no --metrics-cert-dir).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.MetricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestMetricsNeedAuthorization scrapes build-controller's metrics over
// HTTPS as a service account bound to the shipped ClusterRole
// archway-metrics-reader (200), as one without it (403) and without a token
// (401).
func TestMetricsNeedAuthorization(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "metrics")
	ctx := h.ctx
	reader, other := metricsReader(t, h)
	scrape := func(token string) int {
		code, _ := scrapeMetrics(ctx, t, token)
		return code
	}
	g.Expect(env.MetricsURL).To(HavePrefix("https://"))
	// RBAC reaches the authorizer's cache within moments: the reader's 200
	// is the positive signal before the negative checks.
	g.Eventually(func() int { return scrape(reader) }).WithContext(ctx).Should(Equal(http.StatusOK))
	g.Expect(scrape(other)).To(Equal(http.StatusForbidden), "a token without archway-metrics-reader")
	g.Expect(scrape("")).To(Equal(http.StatusUnauthorized), "no token")
}

// TestBuildMetrics scrapes the running build-controller's /metrics before
// and after a real two-platform build: OpenShift's openshift_build_total
// counts one more Complete Docker build, and each platform's duration is
// observed once in archway_build_platform_duration_seconds.
func TestBuildMetrics(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "buildmetrics")
	reader, _ := metricsReader(t, h)
	var before map[string]*dto.MetricFamily
	g.Eventually(func() int {
		code, body := scrapeMetrics(h.ctx, t, reader)
		if code == http.StatusOK {
			before = parseMetrics(t, body)
		}
		return code
	}).WithContext(h.ctx).Should(Equal(http.StatusOK))

	platforms := []string{"linux/amd64", "linux/arm64"}
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), platforms, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s", b.Status.Message)

	// The controller observes the durations once its status write that
	// made the Build Complete has returned, and the watch may show the
	// Complete Build first; so the scrapes go on until the durations are
	// there (the positive signal), then every figure is checked.
	complete := map[string]string{"phase": "Complete", "strategy": "Docker", "reason": ""}
	var after map[string]*dto.MetricFamily
	observed := func() bool {
		code, body := scrapeMetrics(h.ctx, t, reader)
		if code != http.StatusOK {
			return false
		}
		after = parseMetrics(t, body)
		for _, p := range platforms {
			labels := map[string]string{"platform": p, "phase": "Complete"}
			if metricValue(after, "archway_build_platform_duration_seconds", labels) <=
				metricValue(before, "archway_build_platform_duration_seconds", labels) {
				return false
			}
		}
		return true
	}
	g.Eventually(observed).WithContext(h.ctx).Should(BeTrue(), "archway_build_platform_duration_seconds_count of each platform grows by one")
	g.Expect(metricValue(after, "openshift_build_total", complete)-metricValue(before, "openshift_build_total", complete)).
		To(BeNumerically(">=", 1), "openshift_build_total{phase=Complete,strategy=Docker}")
}

// parseMetrics reads the text exposition format.
func parseMetrics(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the metrics: %v", err)
	}
	return families
}

// metricValue is a counter's or gauge's value, or a histogram's count, of
// the series of family name whose labels include labels (0 when absent).
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
