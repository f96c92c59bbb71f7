// Package upgrade upgrades an install of archway's previous release (the
// last in hack/releases, built from its own source by the test) to the
// current tree on the bed, the way docs/admin-guide/install.md says, and
// checks that the users' objects, their gated pods and their running
// builds come through.
package upgrade

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/hack/releaselist"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// previous is where the previous release's images are named: the pod
// runner maps them to the binaries built from its tag.
const previous = "archway.invalid/previous"

// TestUpgrade installs the previous release (the last in hack/releases
// before HEAD: its CRDs and manifests/default, every component
// run from binaries built from the tag's source), creates a BuildConfig
// and a Build still running, a PodPlacementConfig, a PodSchedulingPolicy
// and a ClusterPodSchedulingPolicy, and upgrades to the current tree as
// docs/admin-guide/install.md says (the CRDs, then the components with
// --force-conflicts). Then: every object is there with its UID and spec;
// the ClusterPodPlacementConfig is served at v1alpha1 too; no pod of the
// previous release runs; a pod created during the upgrade is placed and
// no pod in the cluster stays gated; the build started by the previous
// release, kept running through the upgrade, completes under the new one.
// It prints the time of each stage.
func TestUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component twice")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	start := time.Now()
	tag, src := previousSource(t)
	oldBins, err := buildAt(ctx, src, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%s built from its source: %v", tag, time.Since(start).Round(time.Millisecond))
	bins, err := framework.BuildBinaries(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("both releases built: %v", time.Since(start).Round(time.Millisecond))

	ib, err := framework.StartInstallBedImages(ctx, bins, map[string]string{
		previous + "/build-controller": oldBins.Controller,
		previous + "/builder":          oldBins.Builder,
	}, t.TempDir(), bed.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	b := ib.Bed
	t.Cleanup(func() { _ = b.Stop() })
	t.Cleanup(func() {
		if t.Failed() {
			framework.DumpPods(t.Logf, b)
		}
	})
	kubectl := func(args ...string) {
		t.Helper()
		out, err := ib.Kubectl(ctx, args...)
		g.Expect(err).NotTo(HaveOccurred(), out)
	}

	// The previous release, installed as its docs said: its CRDs, then its
	// components, under the previous release's images.
	stage := time.Now()
	newBase, newBuilder := ib.Base, ib.BuilderImage
	ib.Base, ib.BuilderImage = filepath.Join(src, "manifests", "default"), previous+"/builder:"+tag
	oldOverlay, err := ib.WriteOverlay(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(appendImages(oldOverlay, tag)).To(Succeed())
	kubectl("apply", "--server-side", "-k", filepath.Join(src, "manifests", "crd"))
	kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	kubectl("apply", "--server-side", "-k", oldOverlay)
	// The previous release serves no aggregated API.
	g.Expect(framework.WaitInstalledOf(ctx, b, nil)).To(Succeed())
	t.Logf("%s installed: %v", tag, time.Since(stage).Round(time.Millisecond))

	// The users' objects.
	ns, err := b.CreateNamespace(ctx, "upgrade")
	g.Expect(err).NotTo(HaveOccurred())
	ppc := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"}}
	ppc.Spec.Priority = 10
	ppc.Spec.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keep"}}
	g.Expect(b.Client.Create(ctx, ppc)).To(Succeed())
	nsPolicy := policy("PodSchedulingPolicy", ns)
	g.Expect(b.Client.Create(ctx, nsPolicy)).To(Succeed())
	clusterPolicy := policy("ClusterPodSchedulingPolicy", "")
	g.Expect(b.Client.Create(ctx, clusterPolicy)).To(Succeed())
	cppc := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(cppc), cppc)).To(Succeed())

	// A build that runs until the test lets it go: its RUN step asks the
	// test's server (build steps share the host's network under chroot
	// isolation) until it answers 200.
	gate := newGate(t)
	uri, err := framework.GitRepo(filepath.Join(t.TempDir(), "repo"), map[string]string{
		"Dockerfile": fmt.Sprintf("FROM %s\nRUN until wget -q -O /dev/null %s; do sleep 0.2; done; uname -m > /machine\n", b.BaseImage, gate.url),
	})
	g.Expect(err).NotTo(HaveOccurred())
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: b.Registry.Host + "/upgrade/running:v1"}
	bc.Spec.Platforms = []string{"linux/amd64"}
	g.Expect(b.Client.Create(ctx, bc)).To(Succeed())
	build, err := framework.StartBuild(ctx, b.Client, bc)
	g.Expect(err).NotTo(HaveOccurred())
	select {
	case <-gate.asked:
	case <-ctx.Done():
		t.Fatalf("the build's RUN step never ran: %v", ctx.Err())
	}
	g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(build), build)).To(Succeed())
	g.Expect(build.Status.Phase).To(Equal(buildv1.BuildPhaseRunning))
	kept := []client.Object{ppc, nsPolicy, clusterPolicy, cppc, bc, build}
	specs := map[client.Object]any{}
	for _, obj := range kept {
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		specs[obj] = spec(t, obj)
	}

	// The upgrade, as docs/admin-guide/install.md says; a pod created
	// meanwhile.
	stage = time.Now()
	ib.Base, ib.BuilderImage = newBase, newBuilder
	overlay, err := ib.WriteOverlay(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	// The CRDs without --force-conflicts: kubectl owns them since the
	// install, and a conflict here would be a field someone else wrote.
	kubectl("apply", "--server-side", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd"))
	kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	during := testPod(ns, "during", b.BaseImage)
	g.Expect(b.Client.Create(ctx, during)).To(Succeed())
	kubectl("apply", "--server-side", "--force-conflicts", "-k", overlay)
	g.Expect(framework.WaitInstalled(ctx, b)).To(Succeed())
	// Every pod of the previous release is gone.
	g.Eventually(func() []string {
		var pods corev1.PodList
		g.Expect(b.Client.List(ctx, &pods, client.InNamespace(framework.InstallNamespace))).To(Succeed())
		var old []string
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				if strings.HasPrefix(c.Image, previous+"/") {
					old = append(old, p.Name)
				}
			}
		}
		return old
	}).WithContext(ctx).WithTimeout(bed.LongTimeout).Should(BeEmpty(), "pods of %s still run", tag)
	t.Logf("upgraded to the tree: %v", time.Since(stage).Round(time.Millisecond))

	t.Run("nothing lost", func(t *testing.T) {
		g := NewWithT(t)
		for _, obj := range kept {
			uid := obj.GetUID()
			g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "%T %s", obj, obj.GetName())
			g.Expect(obj.GetUID()).To(Equal(uid), "%T %s was made again", obj, obj.GetName())
			if _, ok := obj.(*multiarchv1beta1.ClusterPodPlacementConfig); ok {
				continue // the shipped config: the apply sets its spec
			}
			g.Expect(spec(t, obj)).To(Equal(specs[obj]), "%T %s changed", obj, obj.GetName())
		}
		// The config stored at v1beta1 by the previous release is served
		// at v1alpha1 through the conversion webhook.
		alpha := &unstructured.Unstructured{}
		alpha.SetAPIVersion("multiarch.openshift.io/v1alpha1")
		alpha.SetKind("ClusterPodPlacementConfig")
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(cppc), alpha)).To(Succeed())
		g.Expect(alpha.GetUID()).To(Equal(cppc.UID))
	})

	t.Run("no pod stays gated", func(t *testing.T) {
		g := NewWithT(t)
		got := &corev1.Pod{}
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(during), got, func(p *corev1.Pod) bool {
			return p.Spec.NodeName != ""
		})).To(Succeed())
		g.Expect(got.Labels).To(HaveKeyWithValue(placement.SchedulingGateLabel, placement.SchedulingGateLabelRemoved), "the pod was never gated")
		var pods corev1.PodList
		g.Expect(b.Client.List(ctx, &pods)).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Spec.SchedulingGates).NotTo(ContainElement(corev1.PodSchedulingGate{Name: placement.SchedulingGate}), "pod %s/%s", p.Namespace, p.Name)
		}
	})

	t.Run("running build finishes", func(t *testing.T) {
		g := NewWithT(t)
		// Still running under the new release, which takes it over...
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(build), build)).To(Succeed())
		g.Expect(build.Status.Phase).To(Equal(buildv1.BuildPhaseRunning))
		var pods corev1.PodList
		g.Expect(b.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{"openshift.io/build.name"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			g.Expect(p.Spec.Containers[0].Image).To(HavePrefix(previous+"/builder:"), "pod %s was not started by %s", p.Name, tag)
		}
		// ...and completes once its step is let go.
		gate.open()
		done := &buildv1.Build{}
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(build), done, func(b *buildv1.Build) bool {
			return b.Status.Phase.IsTerminal()
		})).To(Succeed())
		g.Expect(done.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", done.Status.Message, done.Status.Platforms)
	})
	t.Logf("TestUpgrade from %s: %v", tag, time.Since(start).Round(time.Millisecond))
}

// previousSource is the release the upgrade starts from, the last one in
// hack/releases whose commit is not HEAD, and a copy of its source (git
// archive) in a new directory. The release's commit must be in HEAD's
// history; a clone that lacks it (a shallow one) fetches from origin.
func previousSource(t *testing.T) (tag, dir string) {
	t.Helper()
	root := bed.RepoRoot()
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v: %s", err, head)
	}
	releases, err := releaselist.Read(filepath.Join(root, "hack", "releases"))
	if err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, r := range releases {
		if r.Commit != head {
			tag, commit = r.Tag, r.Commit
		}
	}
	if commit == "" {
		t.Fatalf("hack/releases names no release before HEAD: the upgrade test upgrades from one")
	}
	if _, err := git("cat-file", "-e", commit+"^{commit}"); err != nil {
		fetch := []string{"fetch", "origin", commit}
		if shallow, _ := git("rev-parse", "--is-shallow-repository"); shallow == "true" {
			fetch = []string{"fetch", "--unshallow", "origin"}
		}
		if out, err := git(fetch...); err != nil {
			t.Fatalf("%s (%s) is not in this clone, and git %s failed: %v\n%s", tag, commit, strings.Join(fetch, " "), err, out)
		}
	}
	if out, err := git("merge-base", "--is-ancestor", commit, "HEAD"); err != nil {
		t.Fatalf("hack/releases: %s (%s) is not in HEAD's history: %v %s", tag, commit, err, out)
	}
	// A clone with the tag checks the file against it.
	if tagged, err := git("rev-parse", "--verify", "--quiet", "refs/tags/"+tag+"^{commit}"); err == nil && tagged != commit {
		t.Fatalf("hack/releases names %s for %s, but the tag names %s", commit, tag, tagged)
	}
	dir = t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v", tag, err)
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v", tag, err)
	}
	return tag, dir
}

// buildAt builds cmd/builder and cmd/build-controller of the source in src
// into dir, with the flags of the current tree's binaries, so that every
// module dependency the release shares with the tree comes from the build
// cache; only archway's own packages are compiled again (other flags
// would compile every dependency anew: over ten minutes on two cores).
func buildAt(ctx context.Context, src, dir string) (framework.Binaries, error) {
	var bins framework.Binaries
	for _, p := range []struct {
		pkg string
		out *string
	}{{"./cmd/builder", &bins.Builder}, {"./cmd/build-controller", &bins.Controller}} {
		*p.out = filepath.Join(dir, filepath.Base(p.pkg))
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", framework.BuildTags, "-ldflags", "-s -w", "-o", *p.out, p.pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			return bins, fmt.Errorf("go build %s of %s: %w\n%s", p.pkg, src, err, out)
		}
	}
	return bins, nil
}

// appendImages names the previous release's images in the overlay in dir:
// the pod runner maps them to the binaries built from its tag.
func appendImages(dir, tag string) error {
	f, err := os.OpenFile(filepath.Join(dir, "kustomization.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "images:\n- {name: %s, newName: %s/build-controller, newTag: %s}\n", framework.ControllerRepository, previous, tag)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func policy(kind, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kupid.gardener.cloud/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": "keep"},
		"spec":     map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "keep"}}, "nodeSelector": map[string]any{"kubernetes.io/os": "linux"}},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// spec is an object's spec, for comparing before and after.
func spec(t *testing.T, obj client.Object) any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u["spec"]
}

// testPod is a pod the placement webhook gates (no node selection of its
// own) and the runner leaves alone (its image is mapped to no binary).
func testPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{bed.ManualPodLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
}

// gate is an HTTP endpoint that answers 503 until opened, and says when
// it was first asked.
type gate struct {
	url    string
	asked  chan struct{}
	once   sync.Once
	opened atomic.Bool
}

func newGate(t *testing.T) *gate {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gt := &gate{url: "http://" + l.Addr().String() + "/go", asked: make(chan struct{})}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gt.once.Do(func() { close(gt.asked) })
		if !gt.opened.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return gt
}

func (gt *gate) open() { gt.opened.Store(true) }
