package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPages renders the test API packages and checks what a reader of each
// page relies on: kinds with their resource, inlined fields, validation from
// markers, enum values, links to types on the same and other pages, and
// that no link names an anchor the page lacks.
func TestPages(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "stale.md"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("testdata/apis", out, "github.com/archway-build/archway/hack/apidocs"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "stale.md")); !os.IsNotExist(err) {
		t.Errorf("a page of no package is left in the output: %v", err)
	}
	shop := read(t, out, "shop.example.com-v1.md")
	config := read(t, out, "config.example.com-v1alpha1.md")
	for _, want := range []string{
		"# shop.example.com/v1\n",
		"## Orders\n",
		"## Order\n\n`apiVersion: shop.example.com/v1`, `kind: Order`; resource `orders`, namespaced, short name `ord`, status subresource.",
		"Validation: rule: an order may not be called x",
		"| `spec` (required) | [OrderSpec](#orderspec) | spec is what was ordered. Required. |",
		// Common's field inlined into OrderSpec, the map's pointer looked through.
		"| `lines` (required) | map[string][Line](#line) | lines are the ordered items.<br>*Validation:* at least 1 items |",
		"size is how big: Small or Large \\| never Huge.<br>*Validation:* default `Small` |",
		"| `env` | [][corev1.EnvVar](https://pkg.go.dev/k8s.io/api/core/v1#EnvVar) | env is passed on.<br>*Validation:* keyed by `name`; at most 8 items |",
		"Validation: one of `Small`, `Large`",
		"| `Small` | SizeSmall fits a bag. |",
		"| `Large` | SizeLarge needs a van. |",
		"*Validation:* matches `^[a-z]+-[0-9]+$`",
		"sku names the item, e.g. \"&lt;shelf>-&lt;n>\".",
	} {
		if !strings.Contains(shop, want) {
			t.Errorf("shop page lacks %q", want)
		}
	}
	for _, unwanted := range []string{"### Common", "### Unused", "OrderList", "internal", "TypeMeta", "+optional", "kubebuilder"} {
		if strings.Contains(shop, unwanted) {
			t.Errorf("shop page has %q", unwanted)
		}
	}
	for _, want := range []string{
		"# config.example.com/v1alpha1\n",
		"`apiVersion: config.example.com/v1alpha1`, `kind: ShopConfiguration`.\n",
		"| `defaultLine` (required) | [shop.example.com/v1.Line](shop.example.com-v1.md#line) |",
	} {
		if !strings.Contains(config, want) {
			t.Errorf("config page lacks %q", want)
		}
	}
	anchors(t, shop)
	anchors(t, config)
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	localLink = regexp.MustCompile(`\]\(#([^)]+)\)`)
	heading   = regexp.MustCompile(`(?m)^#+ (.+)$`)
)

// anchors fails for a same-page link whose anchor no heading makes.
func anchors(t *testing.T, page string) {
	t.Helper()
	ids := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(page, -1) {
		ids[slug(m[1])] = true
	}
	for _, m := range localLink.FindAllStringSubmatch(page, -1) {
		if !ids[m[1]] {
			t.Errorf("link to #%s, which no heading makes", m[1])
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"BuildSpec":                    "buildspec",
		"Compatibility with OpenShift": "compatibility-with-openshift",
		"build.openshift.io/v1":        "buildopenshiftiov1",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
