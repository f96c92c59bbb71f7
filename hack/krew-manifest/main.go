// Command krew-manifest packages the kubectl plugin's release binaries for
// krew and writes its plugin manifest (`make plugin-release`): each
// bin/release/kubectl-archway_<os>_<arch>[.exe] goes into
// kubectl-archway_<os>_<arch>.tar.gz with the LICENSE, and archway.yaml
// names every archive with its download URL and sha256, for `kubectl krew
// install --manifest=archway.yaml` or a krew index.
//
// The archives are reproducible (fixed owners, modes and times, a gzip
// header without name or time), so the same binaries always give the same
// sha256. A version krew does not accept (vMAJOR.MINOR.PATCH, with an
// optional pre-release or build suffix), a file name that is not a
// platform's binary, or a directory without binaries is refused, and
// nothing is written.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var opts Options
	flag.StringVar(&opts.Dir, "dir", "bin/release", "the directory holding the binaries; the archives and the manifest are written there")
	flag.StringVar(&opts.License, "license", "LICENSE", "the license file each archive holds")
	flag.StringVar(&opts.Version, "version", "", "the release's version, vMAJOR.MINOR.PATCH (required)")
	flag.StringVar(&opts.URL, "url", "", "where the archives are downloaded from, e.g. https://github.com/archway-build/archway/releases/download/v0.1.0 (required)")
	flag.StringVar(&opts.Homepage, "homepage", "https://github.com/archway-build/archway", "the plugin's homepage")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "krew-manifest: unexpected arguments %q: every input is a flag\n", flag.Args())
		os.Exit(2)
	}
	path, err := Write(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "krew-manifest:", err)
		os.Exit(1)
	}
	fmt.Println("==> " + path)
}
