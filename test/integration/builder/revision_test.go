package builder_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

// TestOneCommitForEveryPlatform: two platforms' pods of a Build of a Git
// branch, served over HTTP by git's http-backend; the first clone goes
// through, the second is held until the first pod has recorded its commit
// in spec.revision, and the branch then moves to a new commit before the
// second clone goes on. Both platforms build the first commit: the images'
// /version, their commit labels, their status entries and spec.revision
// all say it, and the manifest list of both is pushed.
func TestOneCommitForEveryPlatform(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	git, err := bed.StartGitServer(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	repo, first, err := git.NewRepo("app", map[string]string{
		"Dockerfile": "FROM " + theBed.BaseImage + "\nCOPY version /version\n",
		"version":    "1\n",
	})
	g.Expect(err).NotTo(HaveOccurred())

	ns, err := theBed.CreateNamespace(ctx, "one-commit")
	g.Expect(err).NotTo(HaveOccurred())
	platforms := []string{"linux/amd64", "linux/arm64"}
	output := theBed.Registry.Host + "/it/one-commit:v1"
	b := newBuild(ns, "app-1", "", output, platforms, nil)
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: repo.URL, Ref: "main"}}
	g.Expect(theBed.Client.Create(ctx, b)).To(Succeed())

	// The second clone (the second platform's, or a later one) waits.
	held, release := git.Hold(2)
	defer release()
	logs := map[string]string{}
	codes := map[string]int{}
	var mu sync.Mutex
	var builders sync.WaitGroup
	for _, p := range platforms {
		builders.Go(func() {
			log, code := runBuilder(t, []string{
				buildv1.BuildEnv + "=" + podBuildJSON(t, b, p),
				"KUBECONFIG=" + theBed.Kubeconfig,
				"POD_NAME=" + podName(b, p),
				"POD_NAMESPACE=" + ns,
			}, "docker-build")
			mu.Lock()
			defer mu.Unlock()
			logs[p], codes[p] = log, code
		})
	}

	// The first clone's commit is recorded, and the second clone waits:
	// now the branch moves.
	got := &buildv1.Build{}
	g.Expect(bed.WaitFor(ctx, theBed.Client, client.ObjectKeyFromObject(b), got, func(b *buildv1.Build) bool {
		return b.Spec.Revision != nil
	})).To(Succeed(), "the first platform's pod records its commit")
	select {
	case <-held:
	case <-time.After(bed.BuildTimeout):
		t.Fatal("the second platform's pod never began its clone")
	}
	second, err := repo.Commit("the branch moves", map[string]string{"version": "2\n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).NotTo(Equal(first))
	release()
	builders.Wait()

	for _, p := range platforms {
		g.Expect(codes[p]).To(Equal(0), "%s:\n%s", p, logs[p])
	}
	g.Expect(logs).To(ContainElement(ContainSubstring("Recorded commit "+first+" in the Build's spec.revision")), "one pod records")
	g.Expect(logs).To(ContainElement(Or(
		ContainSubstring("Building commit "+first+", recorded in the Build's spec.revision by another platform's pod"),
		ContainSubstring("but another platform's pod recorded commit "+first+" first"))), "the other builds the recorded commit")

	g.Expect(theBed.Client.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(got.Spec.Revision.Git.Commit).To(Equal(first))
	g.Expect(got.Spec.Revision.Git.Author.Name).To(Equal("Ada"), "spec.revision has the commit's author, as describe shows it")
	g.Expect(got.Spec.Revision.Git.Message).To(Equal("the first commit"))
	g.Expect(got.Status.Platforms).To(HaveLen(2))
	for _, e := range got.Status.Platforms {
		g.Expect(e.Commit).To(Equal(first), "the entry of %s", e.Platform)
	}
	for _, p := range platforms {
		tag, _ := platform.Tag(output, p)
		img, err := theBed.Registry.OpenImage(ctx, tag)
		g.Expect(err).NotTo(HaveOccurred())
		labels, err := img.Labels(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.commit.id", first), p)
		digest, err := theBed.Registry.ManifestDigest(ctx, "it/one-commit", strings.TrimPrefix(tag, theBed.Registry.Host+"/it/one-commit:"))
		g.Expect(err).NotTo(HaveOccurred())
		version, err := img.TopLayerFile(ctx, digestOf(digest), "/version")
		img.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(version)).To(Equal("1"), "the image of %s holds the first commit's file", p)
	}

	log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, ""), "KUBECONFIG=" + theBed.Kubeconfig},
		"manifest-list", "--insecure", "--wait-timeout=1m", "--termination-log=")
	g.Expect(code).To(Equal(0), log)
	img, err := theBed.Registry.OpenImage(ctx, output)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Manifests).To(HaveLen(2))
	for _, d := range index.Manifests {
		version, err := img.TopLayerFile(ctx, d.Digest, "/version")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(version)).To(Equal("1"), "the index's %s image", d.Platform.Architecture)
	}
}
