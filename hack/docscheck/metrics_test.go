package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// metricName is what archway's metrics are called: its own archway_*
// and the openshift_build_* metrics it serves under OpenShift's names.
var metricName = regexp.MustCompile(`^(archway|openshift)_[a-z0-9_]+$`)

// TestMetricsPage fails when a metric name in the code of pkg/ or cmd/ is
// missing from docs/reference/metrics.md, so a new metric is documented
// with the change that adds it.
func TestMetricsPage(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, dir := range []string{"pkg", "cmd"} {
		if err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(s) {
						names[s] = path
					}
				}
				return true
			})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) == 0 {
		t.Fatal("no metric names found in pkg/ or cmd/: the scan is broken")
	}
	for name, path := range names {
		if !strings.Contains(string(page), "`"+name+"`") {
			t.Errorf("metric %s (%s) is not in docs/reference/metrics.md", name, path)
		}
	}
}
