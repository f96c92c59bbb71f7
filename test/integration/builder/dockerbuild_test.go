package builder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

// newBuild returns a Docker-strategy Build of an inline Dockerfile.
func newBuild(ns, name, dockerfile, output string, platforms, allowedToFail []string) *buildv1.Build {
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: &dockerfile}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	if output != "" {
		b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: output}
	}
	b.Spec.Platforms = platforms
	b.Spec.PlatformsAllowedToFail = allowedToFail
	return b
}

// podBuildJSON is the Build as the controller hands it to one platform's
// pod: only that platform, and the per-platform output tag.
func podBuildJSON(t testing.TB, b *buildv1.Build, p string) string {
	t.Helper()
	pb := b.DeepCopy()
	pb.ManagedFields = nil
	if p != "" {
		pb.Spec.Platforms = []string{p}
		if pb.Spec.Output.To != nil {
			tag, err := platform.Tag(b.Spec.Output.To.Name, p)
			if err != nil {
				t.Fatal(err)
			}
			pb.Spec.Output.To.Name = tag
		}
	}
	data, err := json.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func podName(b *buildv1.Build, p string) string {
	parsed, _ := platform.Parse(p)
	return b.Name + "-" + parsed.NameSuffix() + "-build"
}

// applyControllerStatus writes what the build controller owns while the
// builders run: the platforms' initial entries and the summary, under its
// own field manager.
func applyControllerStatus(ctx context.Context, b *buildv1.Build, status map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetAPIVersion(buildv1.GroupVersion.String())
	u.SetKind("Build")
	u.SetNamespace(b.Namespace)
	u.SetName(b.Name)
	return theBed.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("archway-build-controller"), client.ForceOwnership)
}

// TestDockerBuildInPods runs `builder docker-build` as four platforms'
// pods would, at once, for a Build on the apiserver whose Dockerfile fails
// on s390x (allowed to fail), while the controller writes the status too:
// every platform's entry is there with what its builder wrote, nothing is
// lost, and `builder manifest-list` then pushes the index of the other
// three.
func TestDockerBuildInPods(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := theBed.CreateNamespace(ctx, "docker-build")
	g.Expect(err).NotTo(HaveOccurred())
	output := theBed.Registry.Host + "/it/inpod:v1"
	b := newBuild(ns, "app-1", failOnS390x(), output, fourPlatforms, []string{"linux/s390x"})
	g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())

	var entries []any
	for _, p := range fourPlatforms {
		entries = append(entries, map[string]any{"platform": p, "phase": "Pending"})
	}
	g.Expect(applyControllerStatus(ctx, b, map[string]any{"phase": "Running", "platforms": entries})).To(Succeed())

	// The controller keeps writing its own fields while the builders run;
	// it keeps the entries but leaves their fields to the builders.
	var keys []any
	for _, p := range fourPlatforms {
		keys = append(keys, map[string]any{"platform": p})
	}
	stop := make(chan struct{})
	var controllerWrites int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			controllerWrites++
			_ = applyControllerStatus(ctx, b, map[string]any{"phase": "Running", "platforms": keys,
				"platformsSummary": fmt.Sprintf("0/4 (%d)", controllerWrites)})
		}
	}()

	type result struct {
		log  string
		code int
	}
	results := make(map[string]result)
	var mu sync.Mutex
	var builders sync.WaitGroup
	for _, p := range fourPlatforms {
		builders.Add(1)
		go func() {
			defer builders.Done()
			log, code := runBuilder(t, []string{
				buildv1.BuildEnv + "=" + podBuildJSON(t, b, p),
				"KUBECONFIG=" + theBed.Kubeconfig,
				"POD_NAME=" + podName(b, p),
				"POD_NAMESPACE=" + ns,
			}, "docker-build")
			mu.Lock()
			results[p] = result{log, code}
			mu.Unlock()
		}()
	}
	builders.Wait()
	close(stop)
	wg.Wait()

	for _, p := range fourPlatforms {
		want := 0
		if p == "linux/s390x" {
			want = 1
		}
		g.Expect(results[p].code).To(Equal(want), "%s:\n%s", p, results[p].log)
	}

	got := &buildv1.Build{}
	g.Expect(theBed.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(got.Status.PlatformsSummary).To(HavePrefix("0/4"), "the controller's field is kept")
	g.Expect(got.Status.Platforms).To(HaveLen(4))
	for _, e := range got.Status.Platforms {
		g.Expect(e.PodName).To(Equal(podName(b, e.Platform)))
		g.Expect(e.StartTimestamp).NotTo(BeNil(), e.Platform)
		g.Expect(e.CompletionTimestamp).NotTo(BeNil(), e.Platform)
		if e.Platform == "linux/s390x" {
			g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseFailed))
			g.Expect(e.Reason).To(Equal(buildv1.StatusReasonDockerBuildFailed))
			g.Expect(e.Message).To(ContainSubstring("exit status 1"))
			g.Expect(e.LogSnippet).To(ContainSubstring("RUN test"))
			g.Expect(e.Output).To(BeNil())
			continue
		}
		want, _ := platform.Parse(e.Platform)
		g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseComplete), e.Platform)
		g.Expect(e.Output).NotTo(BeNil(), e.Platform)
		g.Expect(e.Output.ImageDigest).To(HavePrefix("sha256:"))
		g.Expect(e.Output.MediaType).NotTo(BeEmpty())
		g.Expect(e.Output.Size).To(BeNumerically(">", 0))
		g.Expect(platform.Matches(want, platform.Platform{OS: e.Output.OS, Architecture: e.Output.Architecture, Variant: e.Output.Variant})).
			To(BeTrue(), "%s recorded %s/%s/%s", e.Platform, e.Output.OS, e.Output.Architecture, e.Output.Variant)
		tag, _ := platform.Tag(output, e.Platform)
		g.Expect(e.OutputDockerImageReference).To(Equal(tag))
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	for _, m := range []string{"archway-build-controller", "archway-builder-linux-amd64", "archway-builder-linux-arm64",
		"archway-builder-linux-ppc64le", "archway-builder-linux-s390x"} {
		g.Expect(managers).To(HaveKey(m))
	}

	// The last pod: the manifest list of the three that succeeded.
	log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, ""), "KUBECONFIG=" + theBed.Kubeconfig},
		"manifest-list", "--insecure", "--wait-timeout=1m", "--termination-log=")
	g.Expect(code).To(Equal(0), log)
	checkIndex(ctx, g, theBed.Registry, output, []string{"linux/amd64", "linux/arm64", "linux/ppc64le"})
	g.Expect(theBed.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(got.Status.Output.To).NotTo(BeNil())
	g.Expect(got.Status.Output.To.ImageDigest).To(HavePrefix("sha256:"))
	g.Expect(got.Status.Platforms).To(HaveLen(4), "the manifest list pod leaves the entries alone")
}

// TestDockerBuildClassic runs a Build without target platforms: it is
// built for this machine and the Build's own output fields are written.
func TestDockerBuildClassic(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := theBed.CreateNamespace(ctx, "classic")
	g.Expect(err).NotTo(HaveOccurred())
	output := theBed.Registry.Host + "/it/classic:v1"
	b := newBuild(ns, "classic-1", archDockerfile(), output, nil, nil)
	g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())
	log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, ""), "KUBECONFIG=" + theBed.Kubeconfig}, "docker-build")
	g.Expect(code).To(Equal(0), log)

	got := &buildv1.Build{}
	g.Expect(theBed.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(got.Status.OutputDockerImageReference).To(Equal(output))
	g.Expect(got.Status.Output.To).NotTo(BeNil())
	digest, err := theBed.Registry.ManifestDigest(ctx, "it/classic", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.Output.To.ImageDigest).To(Equal(digest))
	g.Expect(got.Status.Platforms).To(BeEmpty())
	g.Expect(got.Status.Stages).NotTo(BeEmpty())
}

// TestDockerBuildGitSource builds a Git source from a local repository at
// a ref and in a contextDir, with build args, pushing to the htpasswd
// registry with the credentials of a mounted push secret.
func TestDockerBuildGitSource(t *testing.T) {
	g := NewWithT(t)
	repo, commit := gitRepo(t, map[string]string{
		"app/Dockerfile": "FROM " + theBed.BaseImage + "\nARG GREETING=default\nARG TARGETARCH\nRUN echo \"$GREETING $TARGETARCH\" > /greeting\n",
		"Dockerfile":     "FROM scratch\n",
	})
	reg := theBed.AuthRegistry
	secretDir := t.TempDir()
	cfg, err := os.ReadFile(authFile(t, reg.Host, reg.Username, reg.Password))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(secretDir, ".dockerconfigjson"), cfg, 0o600)).To(Succeed())

	output := reg.Host + "/it/git:v1"
	b := newBuild("git-ns", "git-1", "", output, nil, nil)
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit,
		Git: &buildv1.GitBuildSource{URI: "file://" + repo, Ref: "feature"}, ContextDir: "app"}
	b.Spec.Strategy.DockerStrategy.BuildArgs = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}
	log, code := runBuilder(t, []string{
		buildv1.BuildEnv + "=" + podBuildJSON(t, b, "linux/arm64"),
		buildv1.PushDockerConfigPathEnv + "=" + secretDir,
	}, "docker-build", "--no-report", "--allow-file-git-uris")
	g.Expect(code).To(Equal(0), log)
	g.Expect(log).To(ContainSubstring(`Cloning "file://` + repo + `" at feature`))

	tag, _ := platform.Tag(output, "linux/arm64")
	img, err := reg.OpenImage(t.Context(), tag)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	digest, err := reg.ManifestDigest(t.Context(), "it/git", strings.TrimPrefix(tag, reg.Host+"/it/git:"))
	g.Expect(err).NotTo(HaveOccurred())
	greeting, err := img.TopLayerFile(t.Context(), digestOf(digest), "/greeting")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(greeting)).To(Equal("hello arm64"))
	g.Expect(log).To(ContainSubstring("Checked out "+commit), "the log says which commit it built")
	labels, err := img.Labels(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.commit.id", commit))
	g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.source-context-dir", "app"))

	t.Run("a missing ref fails with FetchSourceFailed and git's error", func(t *testing.T) {
		g := NewWithT(t)
		bad := b.DeepCopy()
		bad.Spec.Source.Git.Ref = "no-such-branch"
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, bad, "linux/arm64")}, "docker-build", "--no-report", "--allow-file-git-uris")
		g.Expect(code).To(Equal(1))
		g.Expect(log).To(ContainSubstring("FetchSourceFailed"))
		g.Expect(log).To(ContainSubstring("couldn't find remote ref no-such-branch"))
	})
	t.Run("a missing contextDir fails with InvalidContextDirectory", func(t *testing.T) {
		g := NewWithT(t)
		bad := b.DeepCopy()
		bad.Spec.Source.ContextDir = "nope"
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, bad, "linux/arm64")}, "docker-build", "--no-report", "--allow-file-git-uris")
		g.Expect(code).To(Equal(1))
		g.Expect(log).To(ContainSubstring("InvalidContextDirectory"))
	})
	t.Run("a local repository is refused unless allowed", func(t *testing.T) {
		g := NewWithT(t)
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "linux/arm64")}, "docker-build", "--no-report")
		g.Expect(code).To(Equal(1))
		g.Expect(log).To(ContainSubstring(`FetchSourceFailed: the git URI "file://` + repo + `" names a local repository (file://), which this cluster does not allow`))
	})
	// The attack: a ref git reads as an option runs a command in the
	// builder, outside the build's chroot, with the push credentials.
	t.Run("a ref read as an option is refused and runs nothing", func(t *testing.T) {
		g := NewWithT(t)
		marker := filepath.Join(t.TempDir(), "pwned")
		bad := b.DeepCopy()
		bad.Spec.Source.Git.Ref = "--upload-pack=touch " + marker + ";git-upload-pack"
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, bad, "linux/arm64")}, "docker-build", "--no-report", "--allow-file-git-uris")
		g.Expect(code).To(Equal(1))
		g.Expect(log).To(ContainSubstring(`FetchSourceFailed: the git ref "--upload-pack=touch ` + marker))
		g.Expect(log).To(ContainSubstring(`starts with "-", which git would read as an option`))
		g.Expect(marker).NotTo(BeAnExistingFile())
	})
}

// gitRepo makes a repository whose branch "feature" holds files (main
// holds a README only) and returns its path and feature's commit.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
			"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "main")
	git("checkout", "-q", "-b", "feature")
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	git("commit", "-q", "-m", "feature")
	commit := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	return dir, commit
}

// TestReportClient reads, watches and applies Build status with the
// dynamic client the builder uses instead of controller-runtime's.
func TestReportClient(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := theBed.CreateNamespace(ctx, "report-client")
	g.Expect(err).NotTo(HaveOccurred())
	b := newBuild(ns, "rc-1", "FROM x\n", "", []string{"linux/amd64", "linux/arm64"}, nil)
	g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())
	c, err := report.NewClientForConfig(theBed.Config, "report-client-test")
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKeyFromObject(b)

	got, err := c.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Spec.Platforms).To(Equal([]string{"linux/amd64", "linux/arm64"}))

	// The list and watch the manifest-list pod follows a Build with (an
	// informer's, streaming its initial list from the apiserver) sees what
	// the platforms' reporters write.
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		r := report.NewPlatformReporter(c, key, p, "pod-"+p)
		g.Expect(r.Running(ctx)).To(Succeed())
	}
	wctx, cancel := context.WithTimeout(ctx, bed.DefaultTimeout)
	defer cancel()
	_, err = watchtools.UntilWithSync(wctx, c.ListWatch(key), &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, fmt.Errorf("event object %T", ev.Object)
		}
		seen, err := report.BuildFromUnstructured(u)
		if err != nil || seen.Name != "rc-1" {
			return false, fmt.Errorf("event for %s: %w", u.GetName(), err)
		}
		return len(seen.Status.Platforms) == 2, nil
	})
	g.Expect(err).NotTo(HaveOccurred(), "the list and watch of the Build shows both entries")
	got, err = c.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Status.Platforms).To(HaveLen(2))
	for _, e := range got.Status.Platforms {
		g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseRunning))
		g.Expect(e.PodName).To(Equal("pod-" + e.Platform))
	}
}
