// Command apidocs writes the API reference of the docs book from the Go API
// types: one Markdown page per group and version under pkg/apis, each kind
// with its resource, its doc comment and a table of its fields, then every
// type the kinds reach. The doc comments are the text (they start with the
// field's JSON name and say its default), the kubebuilder markers the
// validation column, so the page says what the CRDs in manifests/crd/bases
// enforce. make generate runs it; make verify-generate fails when a page is
// stale.
//
//	go run ./hack/apidocs -apis pkg/apis -out docs/reference/api
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	apis := flag.String("apis", "pkg/apis", "directory holding <group>/<version> API packages")
	out := flag.String("out", "docs/reference/api", "directory the pages are written to (its *.md files are replaced)")
	module := flag.String("module", "github.com/archway-build/archway", "module path of the API packages' imports")
	flag.Parse()
	if err := run(*apis, *out, *module); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}
