// Package release installs archway onto the bed from the release overlay
// (make release-manifests), so that the images pinned by digest are what
// runs: every component's pod and every build pod.
package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestInstallRelease pushes three indexes as make images names them to the
// bed's registry (copies of the bed's base index: the pod runner maps
// archway's repositories to the locally built binaries, whatever the
// image holds), writes the release overlay with make release-manifests'
// program, installs it with kubectl through the bed's overlay of it, and
// checks that every archway pod runs build-controller's image by its
// index's digest, that a four-platform build completes and that its pods
// run the builder by digest.
func TestInstallRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), bed.BuildTimeout)
	defer cancel()
	bins, err := framework.BuildBinaries(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	ib, err := framework.StartInstallBed(ctx, bins, t.TempDir(), bed.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	b := ib.Bed
	t.Cleanup(func() { _ = b.Stop() })
	t.Cleanup(func() {
		if t.Failed() {
			framework.DumpPods(t.Logf, b)
		}
	})
	for _, name := range []string{"build-controller", "builder", "emulation-setup"} {
		copyIndex(t, b, b.BaseImage, ib.ImageRegistry+"/"+name+":v1")
	}
	gen, err := bed.GoBuild(ctx, t.TempDir(), "./hack/release-manifests")
	g.Expect(err).NotTo(HaveOccurred())
	release := filepath.Join(t.TempDir(), "release")
	cmd := exec.CommandContext(ctx, gen, "--registry", ib.ImageRegistry, "--tag", "v1", "--out", release,
		"--manifests", filepath.Join(bed.RepoRoot(), "manifests"), "--tls-verify=false")
	msg, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", msg)
	t.Logf("release-manifests:\n%s", msg)

	digestOf := func(name string) string {
		d, err := b.Registry.ManifestDigest(ctx, strings.TrimPrefix(ib.ImageRegistry, b.Registry.Host+"/")+"/"+name, "v1")
		g.Expect(err).NotTo(HaveOccurred())
		return ib.ImageRegistry + "/" + name + "@" + d
	}
	controller, builder := digestOf("build-controller"), digestOf("builder")
	// The bed's overlay of the release: its config file replaces the
	// release's, so it names the release's pinned builder.
	cfgData, err := os.ReadFile(filepath.Join(release, "config.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := configv1alpha1.Parse(cfgData)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Build.BuilderImage).To(Equal(builder))
	ib.BuilderImage = cfg.Build.BuilderImage
	ib.Base = release
	overlay, err := ib.WriteOverlay(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	g.Expect(ib.Install(ctx, overlay)).To(Succeed())
	t.Logf("release installed, every component serving, %v after kubectl apply", time.Since(start).Round(time.Millisecond))

	var pods corev1.PodList
	g.Expect(b.Client.List(ctx, &pods, client.InNamespace(framework.InstallNamespace))).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			g.Expect(c.Image).To(Equal(controller), "pod %s container %s", p.Name, c.Name)
		}
	}

	done, ns, err := framework.BuildHello(ctx, b, t.TempDir(), "release-test/hello")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s", done.Status.Message)
	t.Logf("kubectl apply -k of the release to a four-platform build complete: %v", time.Since(start).Round(time.Millisecond))
	var buildPods corev1.PodList
	g.Expect(b.Client.List(ctx, &buildPods, client.InNamespace(ns), client.MatchingLabels{buildv1.BuildLabel: buildv1.LabelValue(done.Name)})).To(Succeed())
	g.Expect(buildPods.Items).To(HaveLen(5), "four platforms and the index")
	for _, p := range buildPods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			g.Expect(c.Image).To(Equal(builder), "build pod %s container %s", p.Name, c.Name)
		}
	}
}

// copyIndex pushes the whole index src (a bed registry reference) as dst.
func copyIndex(t *testing.T, b *bed.Bed, src, dst string) {
	t.Helper()
	if err := b.Registry.CopyIndex(t.Context(), src, dst, nil); err != nil {
		t.Fatal(err)
	}
}
