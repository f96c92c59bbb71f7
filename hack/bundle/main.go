// Command bundle writes archway's OLM bundle (registry+v1) from the real
// manifests: kustomize builds the install (--install, manifests/default or
// the release's overlay with every image pinned) and the CRDs
// (manifests/crd), and the ClusterServiceVersion is made from what they
// hold: the Deployments; each one's service account's rules, from the
// Roles and ClusterRoles bound to it (permissions, clusterPermissions);
// every served version of every CRD (owned, with its description); the
// webhooks OLM can keep as the manifests have them (webhookdefinitions);
// one example per owned kind, checked against its schema (alm-examples);
// the images (relatedImages); the upgrade edges from the releases before
// it in hack/releases (replaces, olm.skipRange). What OLM cannot install from a bundle
// (ValidatingAdmissionPolicies, webhook configurations OLM would change,
// archway's own configs) goes into cluster.yaml, for the administrator to
// apply, with the reason for each. The bundle is then loaded and checked
// with the operator-framework validation library, and written only when
// it passes.
//
//	go run ./hack/bundle --version v0.1.0 --out bin/bundle
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var (
		opts      Options
		examples  string
		platforms string
	)
	flag.StringVar(&opts.Install, "install", "manifests/default", "the install kustomization (e.g. the release's pinned overlay)")
	flag.StringVar(&opts.CRDs, "crds", "manifests/crd", "the CRDs' kustomization")
	flag.StringVar(&examples, "examples", "examples,hack/bundle/examples.yaml", "comma-separated files or directories of example objects for alm-examples")
	flag.StringVar(&opts.Out, "out", "bin/bundle", "the directory to write (replaced as a whole)")
	flag.StringVar(&opts.Version, "version", "", "the release, vX.Y.Z (required)")
	flag.StringVar(&opts.Releases, "releases", "hack/releases", "the list of releases: the CSV replaces and skips the ones before --version")
	flag.StringVar(&opts.Meta.Package, "package", "archway", "the OLM package name")
	flag.StringVar(&opts.Meta.Channel, "channel", "alpha", "the channel")
	flag.StringVar(&opts.Meta.MinKubeVersion, "min-kube-version", "1.30.0", "the oldest Kubernetes the release runs on (ValidatingAdmissionPolicy GA)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64,linux/ppc64le,linux/s390x", "the platforms the images hold (OLM's arch labels)")
	flag.BoolVar(&opts.Meta.RequireDigests, "require-digests", false, "refuse an image named by tag (a release)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bundle: unexpected arguments %q: every input is a flag\n", flag.Args())
		os.Exit(2)
	}
	opts.Examples = split(examples)
	opts.Meta.Platforms = split(platforms)
	start := time.Now()
	res, err := Generate(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
	for _, n := range res.Bundle.Notes {
		fmt.Println("note: " + n)
	}
	for _, w := range res.Warnings {
		fmt.Println("warning: " + w)
	}
	for _, f := range res.Files {
		fmt.Printf("==> %s/%s\n", opts.Out, f)
	}
	fmt.Printf("bundle %s written and validated in %s: %d deployments, %d CRDs, %d webhook definitions, %d objects besides, %d for cluster.yaml\n",
		res.Bundle.CSV.Name, time.Since(start).Round(time.Millisecond), len(res.Bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs),
		len(res.Bundle.CRDs), len(res.Bundle.CSV.Spec.WebhookDefinitions), len(res.Bundle.Extra), len(res.Bundle.Cluster))
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
