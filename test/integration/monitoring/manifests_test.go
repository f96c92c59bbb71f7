package monitoring

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/archway-build/archway/test/bed"
)

// component is one Deployment of manifests/default, run by the test as a
// process with the same --controllers, and scraped under the job
// Prometheus gives its series: the name of the metrics Service its
// ServiceMonitor selects.
type component struct {
	deployment  string
	job         string
	controllers string
}

// loadRules reads manifests/monitoring's PrometheusRule and parses its
// groups with Prometheus' own rule-file parser, which also parses every
// expression.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "monitoring", "prometheus_rule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("prometheus_rule.yaml is a %s %s", obj.APIVersion, obj.Kind)
	}
	spec, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("prometheus_rule.yaml: %v", errors.Join(errs...))
	}
	return groups
}

// loadComponents builds manifests/default and pairs each Deployment with
// the metrics Service of manifests/monitoring's ServiceMonitor that
// selects it: every Deployment must have one.
func loadComponents(t *testing.T) []component {
	t.Helper()
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	built, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(bed.RepoRoot(), "manifests", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/default: %v", err)
	}
	var deps []appsv1.Deployment
	var services []corev1.Service
	decodeAll(t, built, func(kind string, raw []byte) {
		switch kind {
		case "Deployment":
			var d appsv1.Deployment
			must(t, yaml.Unmarshal(raw, &d))
			deps = append(deps, d)
		case "Service":
			var s corev1.Service
			must(t, yaml.Unmarshal(raw, &s))
			services = append(services, s)
		}
	})
	monitors, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "monitoring", "service_monitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type serviceMonitor struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	var sms []serviceMonitor
	decodeAll(t, monitors, func(kind string, raw []byte) {
		if kind != "ServiceMonitor" {
			t.Fatalf("service_monitors.yaml holds a %s", kind)
		}
		var sm serviceMonitor
		must(t, yaml.Unmarshal(raw, &sm))
		sms = append(sms, sm)
	})

	var out []component
	for _, d := range deps {
		c := component{deployment: d.Name}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--controllers="); ok {
				c.controllers = v
			}
		}
		podLabels := labels.Set(d.Spec.Template.Labels)
		for _, sm := range sms {
			sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil {
				t.Fatalf("ServiceMonitor %s: %v", sm.Metadata.Name, err)
			}
			for _, s := range services {
				if !sel.Matches(labels.Set(s.Labels)) || len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
					continue
				}
				if c.job != "" {
					t.Errorf("deployment %s is scraped twice: through Services %s and %s", d.Name, c.job, s.Name)
				}
				c.job = s.Name
				if len(sm.Spec.Endpoints) != 1 || !hasPort(s, sm.Spec.Endpoints[0].Port) {
					t.Errorf("ServiceMonitor %s: its endpoint's port is not a port of Service %s", sm.Metadata.Name, s.Name)
				}
			}
		}
		if c.job == "" || c.controllers == "" {
			t.Errorf("deployment %s: no ServiceMonitor selects a metrics Service of its pods (job %q), or no --controllers (%q)", d.Name, c.job, c.controllers)
		}
		out = append(out, c)
	}
	if len(out) < 6 {
		t.Fatalf("%d Deployments in manifests/default", len(out))
	}
	return out
}

func hasPort(s corev1.Service, name string) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

func decodeAll(t *testing.T, data []byte, f func(kind string, raw []byte)) {
	t.Helper()
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if raw == nil {
			continue
		}
		b, err := yaml.Marshal(raw)
		must(t, err)
		kind, _ := raw["kind"].(string)
		f(kind, b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
