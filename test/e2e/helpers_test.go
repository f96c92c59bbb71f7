package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// machineDockerfile records `uname -m` of the platform's build in /machine.
func machineDockerfile(base string) string {
	return "FROM " + base + "\nRUN uname -m > /machine\n"
}

// failOnS390x fails its RUN step on s390x only.
func failOnS390x(base string) string {
	return "FROM " + base + "\nRUN if [ \"$(uname -m)\" = s390x ]; then echo no s390x here >&2; exit 3; fi; uname -m > /machine\n"
}

// harness is one case: its namespace, its BuildConfig and Build.
type harness struct {
	t    testing.TB
	ctx  context.Context
	ns   string
	repo string // the output repository in the bed's registry
	bc   *buildv1.BuildConfig
	b    *buildv1.Build
	tl   *framework.Timeline
}

func newHarness(t testing.TB, prefix string) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout+bed.CaseTimeout)
	t.Cleanup(cancel)
	ns, err := env.Bed.CreateNamespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, ctx: ctx, ns: ns, repo: "e2e/" + ns}
}

// output is the Build's output reference.
func (h *harness) output() string { return env.Bed.Registry.Host + "/" + h.repo + ":v1" }

// buildConfig creates a BuildConfig whose git source (a repository made
// here, served over file://) holds the Dockerfile.
func (h *harness) buildConfig(dockerfile string, platforms, allowedToFail []string) *buildv1.BuildConfig {
	h.t.Helper()
	bc := h.buildConfigSpec(dockerfile, platforms, allowedToFail)
	h.create(bc)
	return bc
}

// buildConfigSpec is the BuildConfig buildConfig creates, not created yet.
func (h *harness) buildConfigSpec(dockerfile string, platforms, allowedToFail []string) *buildv1.BuildConfig {
	h.t.Helper()
	return h.buildConfigSpecFiles(map[string]string{"Dockerfile": dockerfile}, platforms, allowedToFail)
}

// buildConfigSpecFiles is buildConfigSpec with a git source holding files
// (path -> content), the Dockerfile among them.
func (h *harness) buildConfigSpecFiles(files map[string]string, platforms, allowedToFail []string) *buildv1.BuildConfig {
	h.t.Helper()
	uri, err := framework.GitRepo(filepath.Join(h.t.TempDir(), "repo"), files)
	if err != nil {
		h.t.Fatal(err)
	}
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hello", Labels: map[string]string{"app": "hello"}}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: h.output()}
	bc.Spec.Platforms = platforms
	bc.Spec.PlatformsAllowedToFail = allowedToFail
	return bc
}

// create creates the case's BuildConfig.
func (h *harness) create(bc *buildv1.BuildConfig) {
	h.t.Helper()
	if err := env.Bed.Client.Create(h.ctx, bc); err != nil {
		h.t.Fatalf("creating the BuildConfig: %v", err)
	}
	h.bc = bc
}

// startBuild starts build 1 of the BuildConfig as kubectl archway
// start-build does, watching its timeline.
func (h *harness) startBuild() *buildv1.Build {
	h.t.Helper()
	h.watchBuild(instantiate.Name(h.bc.Name, 1))
	b, err := framework.StartBuild(h.ctx, env.Bed.Client, h.bc)
	if err != nil {
		h.t.Fatalf("starting the build: %v", err)
	}
	if b.Name != h.b.Name {
		h.t.Fatalf("started %s, want %s", b.Name, h.b.Name)
	}
	h.b = b
	return b
}

// watchBuild watches the timeline of the Build name, before it exists.
func (h *harness) watchBuild(name string) {
	h.t.Helper()
	tl, err := framework.WatchBuild(h.ctx, watcher, h.ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	tl.Created = time.Now()
	h.b, h.tl = &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}, tl
}

// waitTerminal waits until the Build is Complete, Failed, Error or
// Cancelled and returns it.
func (h *harness) waitTerminal() *buildv1.Build {
	h.t.Helper()
	select {
	case <-h.tl.Done():
	case <-time.After(bed.BuildTimeout):
	}
	b := h.get()
	if !b.Status.Phase.IsTerminal() {
		h.t.Fatalf("build %s did not finish in %v: phase %s, platforms %+v", b.Name, bed.BuildTimeout, b.Status.Phase, b.Status.Platforms)
	}
	return b
}

func (h *harness) get() *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := env.Bed.Client.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: h.b.Name}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// pods lists the Build's pods by name.
func (h *harness) pods() map[string]*corev1.Pod {
	h.t.Helper()
	var list corev1.PodList
	if err := env.Bed.Client.List(h.ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{buildv1.BuildLabel: buildv1.LabelValue(h.b.Name)}); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// nodeArch is the kubernetes.io/arch label of a node.
func nodeArch(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	n := &corev1.Node{}
	if err := env.Bed.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n.Labels[corev1.LabelArchStable]
}

// events returns the reasons of the Build's events.
func (h *harness) events() []string {
	h.t.Helper()
	var list corev1.EventList
	if err := env.Bed.Client.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Build" && e.InvolvedObject.Name == h.b.Name {
			out = append(out, e.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// waitCleanup waits until the manifest-list pod has removed the
// per-platform tags and succeeded: of a Build that ended without a
// manifest list, the one started with --remove-tags once every platform
// pod has ended (in place of the one made with the platform pods, which
// removes nothing then).
func (h *harness) waitCleanup() {
	h.t.Helper()
	name := buildv1.ManifestListPodName(h.b.Name)
	pod := &corev1.Pod{}
	complete := h.get().Status.Phase == buildv1.BuildPhaseComplete
	err := bed.WaitFor(h.ctx, env.Bed.Client, client.ObjectKey{Namespace: h.ns, Name: name}, pod, func(p *corev1.Pod) bool {
		return (complete || controller.RemovesTags(p)) && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	if err != nil {
		h.t.Fatalf("waiting for the manifest-list pod to remove the per-platform tags: %v", err)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		h.t.Fatalf("the manifest-list pod %s failed: %+v", name, pod.Status.ContainerStatuses)
	}
	for _, c := range h.get().Status.Conditions {
		if c.Type == buildv1.BuildConditionPlatformTagsRemoved && (c.Status != corev1.ConditionTrue || c.Reason != buildv1.ReasonPlatformTagsRemoved) {
			h.t.Errorf("condition %s = %+v, want True", c.Type, c)
		}
	}
}

// tags lists the tags of the case's repository.
func (h *harness) tags() []string {
	h.t.Helper()
	tags, err := env.Bed.Registry.Tags(h.ctx, h.repo)
	if err != nil && !strings.Contains(err.Error(), "NAME_UNKNOWN") && !strings.Contains(err.Error(), "404") {
		h.t.Fatalf("listing tags of %s: %v", h.repo, err)
	}
	slices.Sort(tags)
	return tags
}

// entries returns the Build's platform entries by platform.
func entries(b *buildv1.Build) map[string]buildv1.BuildStatusPlatform {
	out := map[string]buildv1.BuildStatusPlatform{}
	for _, e := range b.Status.Platforms {
		out[e.Platform] = e
	}
	return out
}

// indexChildren reads the index at ref and, for each child, its platform
// ("os/arch") and the content of file in its top layer.
func indexChildren(ctx context.Context, ref, file string) (map[string]string, error) {
	img, err := env.Bed.Registry.OpenImage(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	index, _, err := img.Index(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range index.Manifests {
		content, err := img.TopLayerFile(ctx, m.Digest, file)
		if err != nil {
			return nil, err
		}
		out[m.Platform.OS+"/"+m.Platform.Architecture] = strings.TrimSpace(content)
	}
	return out, nil
}

// processesOf lists the PIDs of processes whose environment says they run
// in pod ns/name (the pod's POD_NAME and POD_NAMESPACE).
func processesOf(ns, name string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		vars := strings.Split(string(data), "\x00")
		if slices.Contains(vars, "POD_NAME="+name) && slices.Contains(vars, "POD_NAMESPACE="+ns) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

func allPIDs() []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	pids := make([]string, 0, len(dirs))
	for _, d := range dirs {
		pids = append(pids, filepath.Base(d))
	}
	return pids
}

func cmdline(pid string) string {
	data, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return string(data)
}
