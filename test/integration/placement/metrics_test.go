package placement

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/test/bed"
)

// scrapeRegistry reads reg as Prometheus scrapes it.
func scrapeRegistry(t *testing.T, reg *prometheus.Registry) bed.Counts {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	c, err := bed.Scrape(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWebhookCounters reads the gate webhook's response and
// failed-interception counters as Prometheus scrapes them, around a pod
// the apiserver sends (gated: 200), a request that is no admission review
// (answered 400: the apiserver would admit the pod ungated) and a review
// whose pod does not decode (admitted ungated: 200, but not intercepted).
func TestWebhookCounters(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "webhook-metrics", nil)
	before := scrapeRegistry(t, webhookRegistry)

	if pod := h.create(makePod(h.ns, "gated").image(imgAll).obj()); !gated(pod) {
		t.Fatal("the pod was not gated")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(webhookCA)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	post := func(body string) string {
		t.Helper()
		resp, err := client.Post(webhookURL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	if got := post("not an admission review"); !strings.Contains(got, `"code":400`) {
		t.Errorf("a body that is no admission review: answer %s, want one carrying 400", got)
	}
	review := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",`+
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},`+
		`"namespace":%q,"operation":"CREATE","userInfo":{},"object":{"apiVersion":"v1","kind":"Pod","spec":{"containers":"not a list"}}}}`, h.ns)
	if got := post(review); !strings.Contains(got, `"allowed":true`) || strings.Contains(got, `"patch"`) {
		t.Errorf("a pod that does not decode: answer %s, want it allowed without a patch", got)
	}

	d := scrapeRegistry(t, webhookRegistry).Sub(before)
	for series, want := range map[string]float64{
		`archway_placement_webhook_responses_total{code="400"}`:                    1,
		`archway_placement_webhook_responses_total{code="500"}`:                    0,
		`archway_placement_webhook_intercept_failures_total{reason="bad-request"}`: 1,
		`archway_placement_webhook_intercept_failures_total{reason="decode"}`:      1,
		`archway_placement_webhook_intercept_failures_total{reason="patch"}`:       0,
	} {
		if d[series] != want {
			t.Errorf("%s went up by %v, want %v (all changes: %v)", series, d[series], want, d)
		}
	}
	// Over every namespace: other pods may add to them, never take away.
	for series, least := range map[string]float64{
		`archway_placement_webhook_responses_total{code="200"}`:          2,
		`archway_placement_webhook_pods_total{reason="",result="gated"}`: 1,
	} {
		if d[series] < least {
			t.Errorf("%s went up by %v, want at least %v (all changes: %v)", series, d[series], least, d)
		}
	}
}

// holdingProxy forwards to the bed's registry, holding every manifest
// request until released, and counts the requests by method and kind.
type holdingProxy struct {
	host     string
	mu       sync.Mutex
	count    map[string]int // "GET manifests", "HEAD manifests", "GET blobs"
	released chan struct{}
	once     sync.Once
}

func startHoldingProxy(t *testing.T) *holdingProxy {
	t.Helper()
	target, _ := url.Parse("http://" + testBed.Registry.Host)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &holdingProxy{count: map[string]int{}, released: make(chan struct{})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.host = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch {
		case strings.Contains(r.URL.Path, "/manifests/"):
			kind = "manifests"
		case strings.Contains(r.URL.Path, "/blobs/"):
			kind = "blobs"
		}
		p.mu.Lock()
		p.count[r.Method+" "+kind]++
		p.mu.Unlock()
		if kind == "manifests" {
			select {
			case <-p.released:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		p.release()
		_ = srv.Close()
	})
	return p
}

func (p *holdingProxy) release() { p.once.Do(func() { close(p.released) }) }

func (p *holdingProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.count)
}

// TestImageCacheThroughMetrics: the image cache as its metrics and the
// registry see it, with a controller whose tag cache trusts a tag for
// tagTTL. Pods asking at once for an image nobody inspected yet wait for
// one registry inspection (single flight); a pod within the TTL is answered
// from the cache with no request; after the TTL one HEAD tells that the
// tag has not moved and the digest cache answers.
func TestImageCacheThroughMetrics(t *testing.T) {
	const tagTTL = 15 * time.Second
	proxy := startHoldingProxy(t)
	opts := suiteOptions()
	opts.InsecureRegistries = append(opts.InsecureRegistries, proxy.host)
	opts.TagCacheTTL = tagTTL
	// The proxy holds the first registry request until every pod has
	// missed; the suite's 5s inspection timeout can end it before then on
	// a loaded machine, and a retry is a second inspection. The request
	// must outlive the hold: the test releases it, never the clock.
	opts.InspectionTimeout = 5 * time.Minute
	suiteController.stop()
	var err error
	if suiteController, err = startController(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		suiteController.stop()
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "cache-metrics", nil)
	// The webhook gates once it has seen the new controller's heartbeat.
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(h.ns, "probe").image(imgAMD64Only).obj()
		return k8s.Create(ctx, p, dryRunAll{}) == nil && gated(p), nil
	})
	if err != nil {
		t.Fatalf("the webhook never gated after the controller restarted: %v", err)
	}
	img := proxy.host + "/placement/all:1"
	count := func(name string, labels map[string]string) float64 { return counter(t, name, labels) }
	tagMisses := func() float64 {
		return count("archway_placement_image_cache_lookups_total", map[string]string{"cache": "tag", "result": "miss"})
	}
	inspections := func() float64 {
		return count("archway_placement_registry_requests_total", map[string]string{"operation": "inspect"})
	}

	// Single flight: every pod's reconcile misses while the one registry
	// request the proxy holds is under way, and waits for it.
	const n = 5
	for i := range n {
		if pod := h.create(makePod(h.ns, fmt.Sprintf("cold-%d", i)).image(img).obj()); !gated(pod) {
			t.Fatalf("pod %s was not gated: %v", pod.Name, pod.Labels)
		}
	}
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(context.Context) (bool, error) {
		return tagMisses() >= n && proxy.counts()["GET manifests"] >= 1, nil
	})
	if err != nil {
		t.Fatalf("the controller did not look up the image of the %d pods: %v (misses %v, registry requests %v)", n, err, tagMisses(), proxy.counts())
	}
	// The tag is cached when the held request ends: after this, and
	// before the pods are released.
	fetched := time.Now()
	proxy.release()
	for i := range n {
		h.waitReleased(fmt.Sprintf("cold-%d", i))
	}
	if got := inspections(); got != 1 {
		t.Errorf("registry inspections for %d pods asking at once for one cold image: %v, want 1 (single flight); failed ones %v, tag misses %v, registry requests %v",
			n, got, count("archway_placement_registry_requests_total", map[string]string{"operation": "inspect", "result": "error"}), tagMisses(), proxy.counts())
	}
	// By now the tag is cached: past cached+tagTTL it is stale.
	cached := time.Now()
	inspected := inspections()

	// Within the TTL: the tag cache answers, nothing reaches the registry.
	requests, hits := proxy.counts(), count("archway_placement_image_cache_lookups_total", map[string]string{"cache": "tag", "result": "hit"})
	h.create(makePod(h.ns, "warm").image(img).obj())
	h.waitReleased("warm")
	if time.Since(fetched) >= tagTTL {
		t.Skipf("the warm pod was handled %v after the tag was cached, past the TTL: the machine is too slow to tell", time.Since(fetched))
	}
	if got := proxy.counts(); !maps.Equal(got, requests) {
		t.Errorf("a pod within the tag TTL: registry requests went from %v to %v, want none", requests, got)
	}
	if got := count("archway_placement_image_cache_lookups_total", map[string]string{"cache": "tag", "result": "hit"}) - hits; got != 1 {
		t.Errorf("a pod within the tag TTL: %v more tag cache hits, want 1", got)
	}

	// Past the TTL: the tag is checked with one HEAD, the digest cache
	// answers, no new inspection.
	time.Sleep(time.Until(cached.Add(tagTTL)))
	resolves := count("archway_placement_registry_requests_total", map[string]string{"operation": "resolve"})
	h.create(makePod(h.ns, "stale").image(img).obj())
	h.waitReleased("stale")
	if got := count("archway_placement_registry_requests_total", map[string]string{"operation": "resolve"}) - resolves; got != 1 {
		t.Errorf("a pod past the tag TTL: %v tag resolutions, want 1", got)
	}
	if got := inspections(); got != inspected {
		t.Errorf("registry inspections after the TTL: %v, want still %v (the digest cache answers)", got, inspected)
	}
	if got, was := proxy.counts()["HEAD manifests"], requests["HEAD manifests"]; got != was+1 {
		t.Errorf("HEAD requests for the manifest: %d after the TTL, %d before, want one more", got, was)
	}
}
