package monitoring

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/archway-build/archway/test/bed"
)

// dashboard is the part of a Grafana dashboard the check reads.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaInterval stands for Grafana's range variables, which PromQL does
// not know, in the dashboard's queries.
var grafanaInterval = strings.NewReplacer("$__rate_interval", "2m", "$__interval", "1m", "$__range", "1h")

// checkDashboard reads manifests/monitoring/grafana_dashboard.json: every
// panel has a query, each query parses as PromQL, names only metrics
// docs/reference/metrics.md documents and labels they were exported with,
// and a query whose metrics the components exported during the run
// returns data over it (one of their metrics no part of the run observed,
// such as a build's per-platform time here, is named in the log).
func checkDashboard(t *testing.T, ctx context.Context, engine *promql.Engine, st *store, families map[string]map[string]bool, start, end time.Time) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "monitoring", "grafana_dashboard.json"))
	must(t, err)
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana_dashboard.json: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "docs", "reference", "metrics.md"))
	must(t, err)
	if len(d.Panels) == 0 {
		t.Fatal("grafana_dashboard.json has no panel")
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			what := "panel " + p.Title
			expr := grafanaInterval.Replace(target.Expr)
			if missing := checkSelectors(t, what, expr, families, string(doc)); len(missing) > 0 {
				t.Logf("%s: %v not observed during the run; its query is not evaluated", what, missing)
				continue
			}
			q, err := engine.NewRangeQuery(ctx, st, nil, expr, start, end, time.Minute)
			if err != nil {
				t.Errorf("%s: %s: %v", what, expr, err)
				continue
			}
			res := q.Exec(ctx)
			m, err := res.Matrix()
			switch {
			case res.Err != nil:
				t.Errorf("%s: %s: %v", what, expr, res.Err)
			case err != nil:
				t.Errorf("%s: %s: %v", what, expr, err)
			case len(m) == 0:
				t.Errorf("%s: %s returned nothing over the run, though its metrics were exported", what, expr)
			}
			q.Close()
		}
	}
}
