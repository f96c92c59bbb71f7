package v1alpha1

import (
	"strings"
	"testing"
)

func TestPlacementSection(t *testing.T) {
	const head = "apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\nbuild:\n  builderImage: example.com/builder:1\n"
	cfg, err := Parse([]byte(head + `placement:
  globalPullSecret: {namespace: archway-system, name: pull-secret}
  inspection: {tries: 3, backoff: 1s, maxBackoff: 10s, deadline: 1m, timeout: 5s}
  insecureRegistries: ["127.0.0.1:5000"]
  cache: {digestTTL: 12h, tagTTL: 30s, size: 500}
  workers: 8
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Placement
	if p.GlobalPullSecret.Name != "pull-secret" || p.Inspection.Tries != 3 || p.Inspection.Backoff.Duration.String() != "1s" ||
		p.Cache.TagTTL.Duration.String() != "30s" || p.Cache.Size != 500 || p.Workers != 8 || p.InsecureRegistries[0] != "127.0.0.1:5000" {
		t.Errorf("decoded %+v", p)
	}

	tests := []struct{ section, want string }{
		{"placement: {globalPullSecret: {namespace: Bad_NS, name: x}}", "placement.globalPullSecret.namespace"},
		{"placement: {inspection: {tries: -1}}", "placement.inspection.tries"},
		{"placement: {inspection: {backoff: 0s}}", "placement.inspection.backoff"},
		{"placement: {cache: {tagTTL: -1s}}", "placement.cache.tagTTL"},
		{"placement: {insecureRegistries: ['']}", "placement.insecureRegistries[0]"},
		{"placement: {inspection: {retries: 3}}", "unknown field"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(head + tt.section + "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one naming %s", tt.section, err, tt.want)
		}
	}
}
