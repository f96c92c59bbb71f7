// Command release-manifests writes the release overlay (`make
// release-manifests REGISTRY=... TAG=...`, after `make images` pushed the
// same REGISTRY and TAG): a kustomization of manifests/default, and one of
// manifests/emulation in its emulation/ directory, in which every image
// archway runs is pinned by the digest of the index that was pushed:
// build-controller's Deployments through kustomize's images:, the builder
// image of build pods through a copy of build-controller's configuration
// file (kustomize does not look inside a ConfigMap's file), and the
// emulation DaemonSet's image; and one of manifests/openshift-builds in its
// openshift-builds/ directory, whose Custom-strategy policy admits the
// builder by that digest.
//
// It resolves each tag once, with containers/image (credentials from the
// usual auth files, e.g. after `podman login`), and refuses an image that
// is missing, a tag that is not there, and an image that is not an index
// holding every platform of --platforms. Before writing it builds the
// overlays with kustomize and checks that no image is left by tag; the
// output directory is replaced as a whole, and on any error nothing is
// written.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.podman.io/image/v5/types"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "release-manifests:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts      Options
		platforms string
		tlsVerify bool
		authFile  string
		certDir   string
	)
	flag.StringVar(&opts.Registry, "registry", "", "where make images pushed the images, e.g. quay.io/me (required)")
	flag.StringVar(&opts.Tag, "tag", "", "the images' tag, as given to make images (required)")
	flag.StringVar(&opts.Out, "out", "manifests/release", "the directory to write (replaced as a whole)")
	flag.StringVar(&opts.Manifests, "manifests", "manifests", "archway's manifests directory")
	flag.StringVar(&opts.Base, "base", "default", "the install to pin: default, cert-manager, openshift or openshift/placement (a directory of --manifests)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64,linux/ppc64le,linux/s390x", "platforms every image's index must hold")
	flag.BoolVar(&tlsVerify, "tls-verify", true, "verify the registry's certificate (false also allows plain HTTP)")
	flag.StringVar(&authFile, "authfile", "", "registry credentials file (default: containers' usual auth files)")
	flag.StringVar(&certDir, "cert-dir", "", "directory of CA certificates for the registry")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every input is a flag", flag.Args())
	}
	for _, p := range strings.Split(platforms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			opts.Platforms = append(opts.Platforms, p)
		}
	}
	opts.System = &types.SystemContext{
		AuthFilePath:                authFile,
		DockerCertPath:              certDir,
		DockerInsecureSkipTLSVerify: types.NewOptionalBool(!tlsVerify),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Write(ctx, opts)
	if err != nil {
		return err
	}
	for _, img := range res.Images {
		fmt.Printf("%-16s %s -> %s\n", img.Name, img.Tagged, img.Pinned())
	}
	fmt.Printf("wrote %s (kubectl apply --server-side -k %s), %s/emulation and %s/%s\n", opts.Out, opts.Out, opts.Out, opts.Out, openshiftBuilds)
	return nil
}
