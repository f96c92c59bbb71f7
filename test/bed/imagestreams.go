package bed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// imageStreamCRD is generated once per test binary.
var imageStreamCRD = sync.OnceValues(generateImageStreamCRD)

// generateImageStreamCRD runs controller-gen on openshift/api's image/v1
// types, of the version go.mod pins, and returns the ImageStream CRD.
func generateImageStreamCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	gen, err := Tool("controller-gen")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "imagestream-crd-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cmd := exec.Command(gen, "crd", "paths=github.com/openshift/api/image/v1", "output:crd:dir="+dir)
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generating the ImageStream CRD with controller-gen: %w\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "image.openshift.io_imagestreams.yaml"))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("reading the generated ImageStream CRD: %w", err)
	}
	return crd, nil
}

// ServeImageStreams makes the apiserver serve OpenShift's image streams
// (image.openshift.io/v1 imagestreams) as a CRD generated from
// openshift/api's types, the structural schema of what OpenShift serves,
// and returns once discovery lists them. remove deletes the CRD and
// returns once discovery no longer does.
func (b *Bed) ServeImageStreams(ctx context.Context) (remove func() error, err error) {
	crd, err := imageStreamCRD()
	if err != nil {
		return nil, err
	}
	opts := envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd.DeepCopy()}}
	if _, err := envtest.InstallCRDs(b.Config, opts); err != nil {
		return nil, fmt.Errorf("installing the ImageStream CRD: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(b.Config)
	if err != nil {
		return nil, err
	}
	listed := func(want bool) error {
		ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
		return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			list, err := dc.ServerResourcesForGroupVersion("image.openshift.io/v1")
			found := err == nil && len(list.APIResources) > 0
			return found == want, nil
		})
	}
	if err := listed(true); err != nil {
		return nil, fmt.Errorf("waiting for discovery to list image streams: %w", err)
	}
	return func() error {
		if err := envtest.UninstallCRDs(b.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd.DeepCopy()}}); err != nil {
			return err
		}
		if err := listed(false); err != nil {
			return fmt.Errorf("waiting for discovery to drop image streams: %w", err)
		}
		return nil
	}, nil
}

// ImageStream is an ImageStream as OpenShift's image registry leaves it:
// its repository in the integrated registry and, per tag, the images it
// pointed to, newest first (pull specs by digest).
func ImageStream(ns, name, repo string, tags map[string][]string) *unstructured.Unstructured {
	st := []any{}
	for tag, refs := range tags {
		items := []any{}
		for _, ref := range refs {
			_, digest, _ := strings.Cut(ref, "@")
			items = append(items, map[string]any{"created": "2026-11-29T00:00:00Z", "dockerImageReference": ref, "image": digest, "generation": int64(1)})
		}
		st = append(st, map[string]any{"tag": tag, "items": items})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"status":   map[string]any{"dockerImageRepository": repo, "tags": st},
	}}
}
