// Package monitoring checks manifests/monitoring's alerts against
// archway's real metrics: every component of manifests/default runs as a
// process on the bed (the same binary, the same --controllers), the test
// scrapes them as Prometheus would, makes each failure an alert is for,
// and evaluates every alert expression over the scraped series with
// Prometheus' PromQL engine.
package monitoring

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
)

// speedup compresses time: one real second of the test is one minute for
// the alerts (their windows, `for` and thresholds), so that a scenario of
// ten minutes plays in ten seconds. Timestamps that metrics report
// (*_timestamp_seconds) are compressed the same way.
const speedup = 60

// scrapeEvery is the real scrape interval: one virtual minute.
const scrapeEvery = time.Second

// Triggers: the failures the test makes, in this order.
const (
	trigBadReview           = "an admission review whose pod does not decode, to the gate and policy webhooks"
	trigFailedBuild         = "a Build whose output is a reference by digest"
	trigStuckPod            = "a gated pod whose image's registry refuses connections"
	trigWebhookDown         = "the placement webhook's process stopped"
	trigBuildControllerDown = "build-controller's process stopped"
	trigPlacementDown       = "the placement controller's process stopped"
	trigOperatorDown        = "the placement operator's process stopped"
	trigProtectionDown      = "control-plane protection's process stopped"
	trigPolicyDown          = "the scheduling-policy webhook's process stopped"
	trigTriggersDown        = "build-triggers' process stopped"
)

// expectation is what an alert rule must do: fire after its trigger (and
// never before it), with at least the given label sets among its firing
// series. A rule with no expectation must never fire.
type expectation struct {
	trigger string
	series  []map[string]string
}

// TestAlerts runs every component of manifests/default as a process,
// scrapes them every second, and then: a healthy baseline with a pod
// placed fires no alert; each failure fires the alerts made for it, after
// it and not before; every expression parses and names only metrics (and
// labels) the components export and docs/reference/metrics.md documents.
func TestAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds build-controller and runs every component")
	}
	groups := loadRules(t)
	comps := loadComponents(t)
	expected := map[string]expectation{
		"ArchwayWebhookFailing": {trigBadReview, []map[string]string{
			{"job": "archway-placement-webhook-metrics", "reason": "decode"},
			{"job": "archway-scheduling-policy-metrics"},
		}},
		"ArchwayBuildsFailing":                                                {trigFailedBuild, []map[string]string{{"reason": string(buildv1.StatusReasonInvalidOutputReference)}}},
		"ArchwayGatedPodBacklog":                                              {trigStuckPod, nil},
		"ArchwayImageInspectionErrors":                                        {trigStuckPod, nil},
		"ArchwayWebhookDown/archway-placement-webhook-metrics":                {trigWebhookDown, nil},
		"ArchwayBuildControllerDown/build-controller-metrics":                 {trigBuildControllerDown, nil},
		"ArchwayPlacementControllerDown/archway-placement-controller-metrics": {trigPlacementDown, nil},
		"ArchwayPlacementOperatorDown/archway-placement-operator-metrics":     {trigOperatorDown, nil},
		"ArchwayWebhookDown/archway-control-plane-protection-metrics":         {trigProtectionDown, nil},
		"ArchwayWebhookDown/archway-scheduling-policy-metrics":                {trigPolicyDown, nil},
		"ArchwayWebhookDown/archway-build-triggers-metrics":                   {trigTriggersDown, nil},
	}

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	b, bin, dir := theBed, controllerBin, t.TempDir()
	certs := filepath.Join(dir, "certs")
	must(t, os.Mkdir(certs, 0o700))
	ca, err := bed.WriteServingCert(certs)
	must(t, err)
	// Inspections retried every second for 40 seconds (40 minutes for the
	// alerts) before the pod is released.
	config := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: %s/archway/builder:test
placement:
  insecureRegistries: [%q]
  inspection: {tries: 1000, backoff: 1s, maxBackoff: 1s, deadline: 40s}
`, b.Registry.Host, b.Registry.Host)), 0o600))
	must(t, b.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "archway-system"}}))
	must(t, b.Client.Create(ctx, &multiarchv1beta1.ClusterPodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName},
	}))
	// What the placement operator binds and scales: the operand's
	// ClusterRoles, and Deployments whose pods are never scheduled (the
	// operand runs as processes).
	for _, name := range operands {
		must(t, b.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		must(t, b.Client.Create(ctx, operandDeployment(name)))
	}

	procs := map[string]*process{}
	ports := map[int]bool{}
	for _, c := range comps {
		// A free port may be taken by someone else before the process
		// binds it: then the process exits, and starts again on others.
		var p *process
		for attempt := 0; ; attempt++ {
			if p, err = startComponent(ctx, bin, b.Kubeconfig, config, certs, c, ports); err != nil {
				t.Fatal(err)
			}
			err = p.waitReady(ctx)
			if err == nil || attempt == 2 || !strings.Contains(p.logs.tail(3), "address already in use") {
				break
			}
			p.stop()
		}
		procs[c.deployment] = p
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("%s's log (tail):\n%s", c.deployment, p.logs.tail(30))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	st := newStore()
	sc := &scraper{store: st, procs: procs, comps: comps, start: time.Now(), last: map[string]map[string]bool{}}
	scrapeCtx, stopScraping := context.WithCancel(ctx)
	scraped := make(chan struct{})
	go func() { defer close(scraped); sc.run(scrapeCtx) }()
	triggers := map[string]time.Time{}
	trigger := func(name string) { triggers[name] = sc.virtual(time.Now()) }
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}

	ns, err := b.CreateNamespace(ctx, "alerts")
	must(t, err)
	// Healthy: a pod gated and placed.
	healthy := gatedPod(ns, "placed", b.BaseImage)
	must(t, b.Client.Create(ctx, healthy))
	must(t, bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(healthy), &corev1.Pod{}, func(p *corev1.Pod) bool { return !placement.HasGate(p) }))
	pause(12 * scrapeEvery)

	// Stopped on purpose: the config deleted, the placement operator
	// stops the controller and webhook, and Prometheus finds no target of
	// theirs for ten minutes; their down alerts (expected later, for the
	// processes stopped below) must not fire now.
	stopOnPurpose(t, ctx, b, sc)
	pause(10 * scrapeEvery)
	startAgain(t, ctx, b, sc)
	pause(3 * scrapeEvery)

	trigger(trigBadReview)
	for _, path := range []string{placement.WebhookPath, policy.WebhookPath} {
		var port int
		for _, c := range comps {
			if (path == placement.WebhookPath && strings.Contains(c.controllers, "placement-webhook")) ||
				(path == policy.WebhookPath && strings.Contains(c.controllers, "scheduling-policy-webhook")) {
				port = procs[c.deployment].webhookPort
			}
		}
		if err := postUndecodablePod(ctx, ca, port, path, ns); err != nil {
			t.Fatal(err)
		}
	}
	pause(3 * scrapeEvery)

	trigger(trigFailedBuild)
	failed := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-digest"}}
	failed.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git"}}
	failed.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	failed.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/app@sha256:" + strings.Repeat("0", 64)}
	must(t, b.Client.Create(ctx, failed))
	must(t, bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(failed), &buildv1.Build{}, func(b *buildv1.Build) bool {
		return b.Status.Phase == buildv1.BuildPhaseFailed
	}))
	pause(3 * scrapeEvery)

	trigger(trigStuckPod)
	stuck := gatedPod(ns, "stuck", refusedImage(t))
	must(t, b.Client.Create(ctx, stuck))
	must(t, bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(stuck), &corev1.Pod{}, func(p *corev1.Pod) bool { return !placement.HasGate(p) }))
	pause(8 * scrapeEvery)

	for _, step := range []struct{ trigger, controllers string }{
		{trigWebhookDown, "placement-webhook"},
		{trigBuildControllerDown, "build,"},
		{trigPlacementDown, "pod-placement"},
		{trigOperatorDown, "placement-operator"},
		{trigProtectionDown, "control-plane-protection-webhook"},
		{trigPolicyDown, "scheduling-policy-webhook"},
		{trigTriggersDown, "buildconfig-webhooks"},
	} {
		trigger(step.trigger)
		for _, c := range comps {
			if strings.Contains(c.controllers+",", step.controllers) {
				procs[c.deployment].stop()
			}
		}
		pause(10 * scrapeEvery)
	}
	stopScraping()
	<-scraped
	end := sc.virtual(time.Now())
	t.Logf("scraped %d rounds of %d components into %d series; %v of alert time", sc.rounds, len(comps), len(st.series), end.Sub(sc.virtual(sc.start)))
	if sc.rounds < 60 {
		t.Fatalf("only %d scrapes", sc.rounds)
	}

	checkReferences(t, groups, sc.families)
	checkRunbooks(t, groups)

	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	checkDashboard(t, ctx, engine, st, sc.families, sc.virtual(sc.start), end)
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			key := r.Alert
			if job := r.Labels["job"]; job != "" {
				key += "/" + job
			}
			seen[key] = true
			t.Run(key, func(t *testing.T) {
				fired, series := evaluate(t, ctx, engine, st, r, sc.virtual(sc.start), end)
				want, ok := expected[key]
				if !ok {
					if !fired.IsZero() {
						t.Errorf("fired at %v with no failure made for it: %v", fired.Sub(sc.virtual(sc.start)), series)
					}
					return
				}
				at := triggers[want.trigger]
				switch {
				case fired.IsZero():
					t.Errorf("never fired after %s (at %v)", want.trigger, at.Sub(sc.virtual(sc.start)))
				case fired.Before(at):
					t.Errorf("fired at %v, before %s (at %v): %v", fired.Sub(sc.virtual(sc.start)), want.trigger, at.Sub(sc.virtual(sc.start)), series)
				default:
					t.Logf("fired %v after %s", fired.Sub(at), want.trigger)
				}
				for _, ls := range want.series {
					if !slices.ContainsFunc(series, func(s labels.Labels) bool { return hasLabels(s, ls) }) {
						t.Errorf("no firing series with %v among %v", ls, series)
					}
				}
			})
		}
	}
	for key := range expected {
		if !seen[key] {
			t.Errorf("no rule %s in prometheus_rule.yaml", key)
		}
	}
}

func hasLabels(s labels.Labels, want map[string]string) bool {
	for k, v := range want {
		if s.Get(k) != v {
			return false
		}
	}
	return true
}

// evaluate runs r's expression over [start, end] at every virtual minute,
// as Prometheus' rule manager would, and returns when the alert first
// fired (its expression true at every evaluation for r.For) and the label
// sets of the series that fired.
func evaluate(t *testing.T, ctx context.Context, engine *promql.Engine, st *store, r rulefmt.Rule, start, end time.Time) (time.Time, []labels.Labels) {
	t.Helper()
	q, err := engine.NewRangeQuery(ctx, st, nil, r.Expr, start, end, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", r.Expr, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		t.Fatalf("%s: %v", r.Expr, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	var fired []labels.Labels
	step := time.Minute.Milliseconds()
	for _, s := range m {
		var since, prev int64
		for i, p := range s.Floats {
			if i == 0 || p.T != prev+step {
				since = p.T
			}
			prev = p.T
			if p.T-since >= time.Duration(r.For).Milliseconds() {
				at := time.UnixMilli(p.T)
				if first.IsZero() || at.Before(first) {
					first = at
				}
				fired = append(fired, s.Metric)
				break
			}
		}
	}
	return first, fired
}

// checkReferences asserts that every metric the rules select is one the
// components exported (or Prometheus' up) and documented in
// docs/reference/metrics.md, and that every label they match on (but the
// job and instance Prometheus adds) is one of that metric's.
func checkReferences(t *testing.T, groups *rulefmt.RuleGroups, families map[string]map[string]bool) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "docs", "reference", "metrics.md"))
	must(t, err)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			for _, missing := range checkSelectors(t, r.Alert, r.Expr, families, string(doc)) {
				t.Errorf("%s selects %s, which no component exported", r.Alert, missing)
			}
		}
	}
}

// checkSelectors parses expr (what names it in errors) and checks each
// metric it selects but up: docs/reference/metrics.md (doc) documents its
// family, and each label it matches is one the family was exported with.
// It returns the selected metrics no component exported during the run
// (their labels unchecked).
func checkSelectors(t *testing.T, what, expr string, families map[string]map[string]bool, doc string) []string {
	t.Helper()
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return nil
	}
	var missing []string
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || vs.Name == "up" {
			return nil
		}
		name := vs.Name
		family := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (families[base] != nil || strings.Contains(doc, "`"+base+"`")) {
				family = base
			}
		}
		if !strings.Contains(doc, "`"+family+"`") {
			t.Errorf("%s selects %s, which docs/reference/metrics.md does not document", what, family)
		}
		got := families[family]
		if got == nil {
			missing = append(missing, name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && m.Name != "job" && m.Name != "instance" && !got[m.Name] {
				t.Errorf("%s matches label %s of %s, which has none (labels: %v)", what, m.Name, name, got)
			}
		}
		return nil
	})
	return missing
}

// checkRunbooks asserts that every alert links its runbook: a section of
// docs/admin-guide/monitoring.md named after it.
func checkRunbooks(t *testing.T, groups *rulefmt.RuleGroups) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "docs", "admin-guide", "monitoring.md"))
	must(t, err)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			const page = "https://github.com/archway-build/archway/blob/main/docs/admin-guide/monitoring.md#"
			if r.Annotations["runbook_url"] != page+strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q, want %s%s", r.Alert, r.Annotations["runbook_url"], page, strings.ToLower(r.Alert))
			}
			if !strings.Contains(string(doc), "\n### "+r.Alert+"\n") {
				t.Errorf("%s: docs/admin-guide/monitoring.md has no section ### %s", r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: no summary or no severity", r.Alert)
			}
		}
	}
}

func gatedPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{placement.SchedulingGateLabel: placement.SchedulingGateLabelGated}},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: placement.SchedulingGate}},
			Containers:      []corev1.Container{{Name: "main", Image: image}},
		},
	}
}

// refusedImage names an image on a loopback port nothing listens on.
func refusedImage(t *testing.T) string {
	port, err := bed.FreePort()
	must(t, err)
	return "127.0.0.1:" + strconv.Itoa(port) + "/nowhere/app:1"
}

// postUndecodablePod sends the webhook at path what the apiserver would
// send for a pod create, with a pod that does not decode.
func postUndecodablePod(ctx context.Context, ca []byte, port int, path, ns string) error {
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "undecodable", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"kind":"Pod","apiVersion":"v1","spec":{"containers":"none"}}`)},
		},
	})
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), bytes.NewReader(review))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}

// process is one component running.
type process struct {
	name                                string
	webhookPort, metricsPort, probePort int
	cmd                                 *exec.Cmd
	cancel                              context.CancelFunc
	logs                                *logBuffer
	once                                sync.Once
	done                                chan struct{} // closed when the process has exited
}

// startComponent starts c's process on free ports none of used, and adds
// them to used.
func startComponent(ctx context.Context, bin, kubeconfig, config, certs string, c component, used map[int]bool) (*process, error) {
	p := &process{name: c.deployment, logs: &logBuffer{}, done: make(chan struct{})}
	for _, port := range []*int{&p.webhookPort, &p.metricsPort, &p.probePort} {
		for *port == 0 || used[*port] {
			var err error
			if *port, err = bed.FreePort(); err != nil {
				return nil, err
			}
		}
		used[*port] = true
	}
	pctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	p.cmd = exec.CommandContext(pctx, bin,
		"--kubeconfig="+kubeconfig,
		"--config="+config,
		"--controllers="+c.controllers,
		"--leader-elect=false",
		"--webhook-host=127.0.0.1",
		fmt.Sprintf("--webhook-port=%d", p.webhookPort),
		"--webhook-cert-dir="+certs,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p.metricsPort),
		// Plain HTTP: the test scrapes without a token (the install test
		// checks the HTTPS endpoint's authorization).
		"--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p.probePort),
	)
	p.cmd.Env = append(os.Environ(), "POD_NAMESPACE=archway-system")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) stop() {
	p.once.Do(func() {
		p.cancel()
		<-p.done
	})
}

func (p *process) waitReady(ctx context.Context) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", p.probePort)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bed.CaseTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited", p.name)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s never became ready: %w\n%s", p.name, err, p.logs.tail(30))
	}
	return nil
}

// logBuffer is a process's output, safe for its writers and the test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// scraper scrapes every component each scrapeEvery, as Prometheus does:
// each sample labelled with the component's job and instance, up 1 or 0
// per target, and a staleness marker for each series that left a scrape
// or whose target stopped answering.
type scraper struct {
	store  *store
	procs  map[string]*process
	comps  []component
	start  time.Time
	rounds int
	// last holds, per target, the series of its previous scrape.
	last map[string]map[string]bool
	// families are the label names of every metric family scraped.
	families map[string]map[string]bool
	// gone are the Deployments scaled to 0: Prometheus has no target of
	// theirs, so no up series either.
	mu   sync.Mutex
	gone map[string]bool
}

// setGone makes deployments targets or none.
func (s *scraper) setGone(gone bool, deployments ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = map[string]bool{}
	}
	for _, d := range deployments {
		s.gone[d] = gone
	}
}

// virtual is the alerts' time of the real time t.
func (s *scraper) virtual(t time.Time) time.Time {
	return s.start.Add(t.Sub(s.start) * speedup)
}

func (s *scraper) run(ctx context.Context) {
	s.families = map[string]map[string]bool{}
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	hc := &http.Client{Timeout: scrapeEvery}
	for {
		now := time.Now()
		ts := s.virtual(now).UnixMilli()
		for _, c := range s.comps {
			p := s.procs[c.deployment]
			instance := fmt.Sprintf("127.0.0.1:%d", p.metricsPort)
			target := labels.FromStrings("job", c.job, "instance", instance)
			s.mu.Lock()
			gone := s.gone[c.deployment]
			s.mu.Unlock()
			if gone {
				// The target's series end, its up with them.
				if last, ok := s.last[instance]; ok {
					for key := range last {
						s.store.stale(key, ts)
					}
					s.store.stale(withName(target, "up").String(), ts)
					delete(s.last, instance)
				}
				continue
			}
			seen := map[string]bool{}
			fams, err := s.scrape(ctx, hc, "http://"+instance+"/metrics")
			up := 0.0
			if err == nil {
				up = 1
				for _, f := range fams {
					s.add(f, target, ts, seen)
				}
			}
			s.store.add(withName(target, "up"), ts, up)
			for key := range s.last[instance] {
				if !seen[key] {
					s.store.stale(key, ts)
				}
			}
			s.last[instance] = seen
		}
		s.rounds++
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *scraper) scrape(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// add stores every sample of f as Prometheus flattens it: histograms as
// _bucket (with le), _sum and _count, summaries as quantiles, _sum and
// _count.
func (s *scraper) add(f *dto.MetricFamily, target labels.Labels, ts int64, seen map[string]bool) {
	name := f.GetName()
	names := s.families[name]
	if names == nil {
		names = map[string]bool{}
		s.families[name] = names
	}
	put := func(metric string, m *dto.Metric, v float64, extra ...string) {
		b := labels.NewBuilder(target)
		b.Set(model.MetricNameLabel, metric)
		for _, l := range m.GetLabel() {
			b.Set(l.GetName(), l.GetValue())
			names[l.GetName()] = true
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		lset := b.Labels()
		if strings.HasSuffix(metric, "_timestamp_seconds") {
			v = float64(s.start.Unix()) + (v-float64(s.start.Unix()))*speedup
		}
		s.store.add(lset, ts, v)
		seen[lset.String()] = true
	}
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			put(name, m, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			put(name, m, m.GetGauge().GetValue())
		case dto.MetricType_UNTYPED:
			put(name, m, m.GetUntyped().GetValue())
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			inf := false
			for _, bk := range h.GetBucket() {
				inf = inf || math.IsInf(bk.GetUpperBound(), 1)
				put(name+"_bucket", m, float64(bk.GetCumulativeCount()), "le", model.FloatString(bk.GetUpperBound()).String())
			}
			if !inf {
				put(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf")
			}
			put(name+"_sum", m, h.GetSampleSum())
			put(name+"_count", m, float64(h.GetSampleCount()))
		case dto.MetricType_SUMMARY:
			sm := m.GetSummary()
			for _, q := range sm.GetQuantile() {
				put(name, m, q.GetValue(), "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
			}
			put(name+"_sum", m, sm.GetSampleSum())
			put(name+"_count", m, float64(sm.GetSampleCount()))
		}
	}
}

func withName(lset labels.Labels, name string) labels.Labels {
	b := labels.NewBuilder(lset)
	b.Set(model.MetricNameLabel, name)
	return b.Labels()
}

// operands are the Deployments the placement operator scales.
var operands = []string{placement.ControllerName, placement.WebhookComponentName}

// operandDeployment is a Deployment of the operand, at 0 replicas as
// installed, whose pods fit no node: they stay Pending and go at once
// when deleted.
func operandDeployment(name string) *appsv1.Deployment {
	ls := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "archway-system", Name: name, Labels: ls},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"archway.dev/test-no-such-node": "true"},
					Containers:   []corev1.Container{{Name: "main", Image: "example.invalid/" + name}},
				},
			},
		},
	}
}

// waitReplicas waits until the placement operator has scaled every
// operand Deployment to replicas.
func waitReplicas(t *testing.T, ctx context.Context, b *bed.Bed, replicas int32) {
	t.Helper()
	for _, name := range operands {
		must(t, bed.WaitFor(ctx, b.Client, client.ObjectKey{Namespace: "archway-system", Name: name}, &appsv1.Deployment{}, func(d *appsv1.Deployment) bool {
			return ptr.Deref(d.Spec.Replicas, 1) == replicas
		}))
	}
}

// stopOnPurpose deletes the ClusterPodPlacementConfig, waits for the
// placement operator to let it go (the operand stopped: its Deployments
// at 0), and then stops scraping the controller and webhook, as
// Prometheus loses their targets.
func stopOnPurpose(t *testing.T, ctx context.Context, b *bed.Bed, sc *scraper) {
	t.Helper()
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	must(t, b.Client.Delete(ctx, cfg))
	must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		err := b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}))
	waitReplicas(t, ctx, b, 0)
	sc.setGone(true, operands...)
}

// startAgain creates the config again, waits for the placement operator
// to scale the operand up, and scrapes it again.
func startAgain(t *testing.T, ctx context.Context, b *bed.Bed, sc *scraper) {
	t.Helper()
	must(t, b.Client.Create(ctx, &multiarchv1beta1.ClusterPodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName},
	}))
	waitReplicas(t, ctx, b, 1)
	sc.setGone(false, operands...)
}
