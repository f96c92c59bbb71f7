package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

var s2iBuilder struct {
	sync.Mutex
	ref string
}

// s2iBuilderImage builds the test source-to-image builder image
// (bed.S2IBuilderFiles) for the four platforms through build-controller,
// as a Docker BuildConfig, once per test binary, and returns its
// reference.
func s2iBuilderImage(t *testing.T) string {
	t.Helper()
	s2iBuilder.Lock()
	defer s2iBuilder.Unlock()
	if s2iBuilder.ref != "" {
		return s2iBuilder.ref
	}
	h := newHarness(t, "s2ibuilder")
	h.create(h.buildConfigSpecFiles(bed.S2IBuilderFiles(env.Bed.BaseImage), framework.Platforms, nil))
	h.startBuild()
	if b := h.waitTerminal(); b.Status.Phase != buildv1.BuildPhaseComplete {
		t.Fatalf("building the S2I builder image: %s: %s", b.Status.Phase, b.Status.Message)
	}
	s2iBuilder.ref = h.output()
	return s2iBuilder.ref
}

// sourceBuildConfig creates the case's BuildConfig: a git source holding
// files, built with the Source strategy from builder.
func (h *harness) sourceBuildConfig(builder string, files map[string]string, platforms, allowedToFail []string) {
	h.t.Helper()
	bc := h.buildConfigSpecFiles(files, platforms, allowedToFail)
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	h.create(bc)
}

// TestFourPlatformSourceBuild builds a git source with the Source strategy
// for four platforms through build-controller, from a builder image made
// here for those four: the index has four children, each holding what
// its builder image's assemble compiled on that platform's machine with
// the source's .s2i/environment. The time it took is logged beside that
// of a Docker build of the same app (a Dockerfile doing what the S2I
// build does).
func TestFourPlatformSourceBuild(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	app := map[string]string{"main.txt": "hello from s2i\n", ".s2i/environment": "GREETING=from-file\n"}

	h := newHarness(t, "s2i")
	h.sourceBuildConfig(builder, app, framework.Platforms, nil)
	start := time.Now()
	h.startBuild()
	b := h.waitTerminal()
	sourceTook := time.Since(start)
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	for _, p := range framework.Platforms {
		g.Expect(entries(b)[p].Phase).To(Equal(buildv1.BuildPhaseComplete), "entry of %s", p)
	}
	artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifacts).To(HaveLen(4))
	for _, p := range framework.Platforms {
		g.Expect(artifacts[p]).To(Equal("hello from s2i\nmachine="+framework.UnameOf[p]+"\ngreeting=from-file\nassembler=image\nbuilds=1"), "the %s child", p)
	}
	g.Expect(h.tags()).To(Equal([]string{"v1"}), "the per-platform tags are gone")
	logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, buildv1.PlatformPodName(b.Name, "linux/s390x"))
	g.Expect(err).NotTo(HaveOccurred(), logs)
	g.Expect(logs).To(ContainSubstring("RUN " + bed.S2IScriptsDir + "/assemble"))
	g.Expect(logs).To(ContainSubstring("assembling on s390x as 1001"))

	// The same app as a Docker build, for the time it takes.
	d := newHarness(t, "s2idocker")
	dockerApp := map[string]string{
		"main.txt": app["main.txt"],
		"Dockerfile": "FROM " + builder + "\nENV GREETING=from-file\nUSER root\nCOPY main.txt /tmp/src/main.txt\n" +
			"RUN chown -R 1001:0 /tmp/src\nUSER 1001\nRUN " + bed.S2IScriptsDir + "/assemble\nCMD " + bed.S2IScriptsDir + "/run\n",
	}
	d.create(d.buildConfigSpecFiles(dockerApp, framework.Platforms, nil))
	start = time.Now()
	d.startBuild()
	db := d.waitTerminal()
	dockerTook := time.Since(start)
	g.Expect(db.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s", db.Status.Message)
	t.Logf("four-platform Source build %v, the same app as a Docker build %v (start-build to terminal phase)",
		sourceTook.Round(100*time.Millisecond), dockerTook.Round(100*time.Millisecond))
}

// TestSourceBuilderImageMissingPlatform: the builder image is a
// single-platform amd64 image and the Build asks for linux/amd64 and
// linux/arm64, arm64 allowed to fail: the controller reads the builder
// image's platforms before any pod; arm64 fails at once with the reason
// BaseImagePlatformNotFound and never gets a pod, amd64 builds with
// source-to-image, and the Build completes.
func TestSourceBuilderImageMissingPlatform(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2imissing")
	img, err := env.Bed.Registry.OpenImage(h.ctx, builder)
	g.Expect(err).NotTo(HaveOccurred())
	index, _, err := img.Index(h.ctx)
	img.Close()
	g.Expect(err).NotTo(HaveOccurred())
	var amd64 string
	for _, m := range index.Manifests {
		if m.Platform != nil && m.Platform.Architecture == "amd64" {
			amd64 = strings.TrimSuffix(builder, ":v1") + "@" + m.Digest.String()
		}
	}
	g.Expect(amd64).NotTo(BeEmpty())

	h.sourceBuildConfig(amd64, map[string]string{"main.txt": "one platform\n"}, []string{"linux/amd64", "linux/arm64"}, []string{"linux/arm64"})
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	arm := entries(b)["linux/arm64"]
	g.Expect(arm.Phase).To(Equal(buildv1.BuildPhaseFailed))
	g.Expect(arm.Reason).To(Equal(buildv1.StatusReasonBaseImagePlatformNotFound))
	g.Expect(arm.Message).To(ContainSubstring("has no linux/arm64 (it has linux/amd64)"))
	g.Expect(h.tl.PodNames()).NotTo(ContainElement(buildv1.PlatformPodName(b.Name, "linux/arm64")), "arm64 never had a pod")
	artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifacts).To(Equal(map[string]string{"linux/amd64": "one platform\nmachine=x86_64\ngreeting=none\nassembler=image\nbuilds=1"}))
}

// TestIncrementalSourceBuild builds a Source BuildConfig for four
// platforms, then again with incremental as `kubectl archway start-build
// --incremental` asks it: the second build's pod of each platform
// restores the artifacts of the first build's image of its own platform
// (the index's child), so every child of the second index counts two
// builds and says the machine it was built on.
func TestIncrementalSourceBuild(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2iincr")
	h.sourceBuildConfig(builder, map[string]string{"main.txt": "again\n"}, framework.Platforms, nil)
	for n := int64(1); n <= 2; n++ {
		h.watchBuild(instantiate.Name(h.bc.Name, n))
		req := instantiate.Request{TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}}}
		if n == 2 {
			req.Incremental = ptr.To(true)
		}
		b, err := instantiate.NewStarter(env.Bed.Client, nil).Start(h.ctx, h.ns, h.bc.Name, req)
		g.Expect(err).NotTo(HaveOccurred())
		h.b = b
		b = h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "build %d: %s, platforms: %+v", n, b.Status.Message, b.Status.Platforms)
		artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(artifacts).To(HaveLen(4))
		for _, p := range framework.Platforms {
			g.Expect(artifacts[p]).To(HaveSuffix(fmt.Sprintf("machine=%s\ngreeting=none\nassembler=image\nbuilds=%d", framework.UnameOf[p], n)),
				"build %d, the %s child", n, p)
		}
	}
	logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, buildv1.PlatformPodName(h.b.Name, "linux/ppc64le"))
	g.Expect(err).NotTo(HaveOccurred(), logs)
	g.Expect(logs).To(ContainSubstring("Incremental build: restoring the artifacts of the previous image"))
}

// TestBinarySourceBuild: a user bound to archway:build-starter (and, as
// installed, the Source strategy's role: create on builds/source) runs
// `kubectl archway start-build --from-dir D` on a Source BuildConfig: the
// directory uploaded once is every platform's source, .s2i/environment
// included, and each child of the index holds what assemble compiled from
// it on its machine.
func TestBinarySourceBuild(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2ibinary")
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hello"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: h.output()}
	g.Expect(env.Bed.Client.Create(h.ctx, bc)).To(Succeed())
	h.bc = bc
	user := h.starter("dev")
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "main.txt"), []byte("uploaded\n"), 0o644)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(dir, ".s2i"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, ".s2i", "environment"), []byte("GREETING=from-upload\n"), 0o644)).To(Succeed())

	platforms := []string{"linux/amd64", "linux/s390x"}
	h.watchBuild("hello-1")
	out, err := h.plugin(user, "start-build", "hello", "--from-dir", dir, "--wait", "--platforms", strings.Join(platforms, ","),
		"--build-endpoint", env.WebhookURL, "--build-endpoint-ca", env.WebhookCAFile)
	g.Expect(err).NotTo(HaveOccurred(), out)
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message %s, platforms %+v", b.Status.Message, b.Status.Platforms)
	artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifacts).To(HaveLen(2))
	for _, p := range platforms {
		g.Expect(artifacts[p]).To(Equal("uploaded\nmachine="+framework.UnameOf[p]+"\ngreeting=from-upload\nassembler=image\nbuilds=1"), "the %s child", p)
	}
}

// TestGitHubPushSourceBuild: a GitHub push to a Source BuildConfig's
// webhook builds the pushed commit for four platforms with the builder
// image of each, and records the commit and the GitHub cause.
func TestGitHubPushSourceBuild(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2ipush")
	bc := h.buildConfigSpecFiles(map[string]string{"main.txt": "pushed\n"}, framework.Platforms, nil)
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	h.create(bc)
	commit := h.githubPush(g, bc)
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	g.Expect(b.Spec.Revision.Git.Commit).To(Equal(commit))
	g.Expect(b.Spec.TriggeredBy[0].Message).To(Equal("GitHub WebHook"))
	artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifacts).To(HaveLen(4))
	for _, p := range framework.Platforms {
		g.Expect(artifacts[p]).To(Equal("pushed\nmachine="+framework.UnameOf[p]+"\ngreeting=none\nassembler=image\nbuilds=1"), "the %s child", p)
	}
}

// TestSourceBuildSecrets builds a Source BuildConfig naming a Secret in
// source.secrets for amd64 and arm64 through build-controller: each
// platform's pod has the Secret mounted, and the source's assemble reads
// its key at destinationDir in the builder image's working directory
// (its artifact records the key's digest); no layer of either child of
// the index holds the key or its value.
func TestSourceBuildSecrets(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2isecrets")
	token := "tok-" + h.ns
	g.Expect(env.Bed.Client.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "npm-creds"},
		StringData: map[string]string{"token": token}})).To(Succeed())
	platforms := []string{"linux/amd64", "linux/arm64"}
	bc := h.buildConfigSpecFiles(map[string]string{
		"main.txt": "with a secret\n",
		".s2i/bin/assemble": "#!/bin/sh\nset -e\n" +
			"{ cat /tmp/src/main.txt; echo \"machine=$(uname -m)\"; echo \"token-sha=$(sha256sum creds/token | cut -d' ' -f1)\"; } > " +
			bed.S2IArtifact + "\n",
	}, platforms, nil)
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	bc.Spec.Source.Secrets = []buildv1.SecretBuildSource{{Secret: corev1.LocalObjectReference{Name: "npm-creds"}, DestinationDir: "creds"}}
	h.create(bc)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	sum := sha256.Sum256([]byte(token))
	artifacts, err := indexChildren(h.ctx, h.output(), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(artifacts).To(HaveLen(2))
	for _, p := range platforms {
		g.Expect(artifacts[p]).To(Equal("with a secret\nmachine="+framework.UnameOf[p]+"\ntoken-sha="+hex.EncodeToString(sum[:])),
			"the %s child: assemble read the key", p)
	}
	img, err := env.Bed.Registry.OpenImage(h.ctx, h.output())
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	index, _, err := img.Index(h.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range index.Manifests {
		entries, err := img.LayerEntries(h.ctx, m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).NotTo(BeEmpty())
		for _, e := range entries {
			g.Expect(e.Name).NotTo(ContainSubstring("creds/"), "%s: layer %d", m.Platform.Architecture, e.Layer)
			g.Expect(string(e.Content)).NotTo(ContainSubstring(token), "%s: layer %d's %s", m.Platform.Architecture, e.Layer, e.Name)
		}
	}
	logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, buildv1.PlatformPodName(b.Name, "linux/arm64"))
	g.Expect(err).NotTo(HaveOccurred(), logs)
	g.Expect(logs).To(ContainSubstring("Secrets for assemble, left out of the image: " + bed.S2IWorkDir + "/creds/token\n"))
	g.Expect(logs).NotTo(ContainSubstring(token))
}

// TestIncrementalSourceBuildPushSecret: the output is on the bed's
// registry that requires a password, which only the push secret has (the
// Build names no pull secret, its service account none). The second,
// incremental, build's pods read the previous image, the first build's
// index, with the push secret, as OpenShift's builder pulls it: every child
// of the second index counts two builds.
func TestIncrementalSourceBuildPushSecret(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilderImage(t)
	h := newHarness(t, "s2iincrauth")
	reg := env.Bed.AuthRegistry
	config, err := reg.AuthFile(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Bed.Client.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "push"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: data}})).To(Succeed())
	platforms := []string{"linux/amd64", "linux/arm64"}
	bc := h.buildConfigSpecFiles(map[string]string{"main.txt": "behind a password\n"}, platforms, nil)
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	output := reg.Host + "/" + h.repo + ":v1"
	bc.Spec.Output = buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: output},
		PushSecret: &corev1.LocalObjectReference{Name: "push"}}
	h.create(bc)
	for n := int64(1); n <= 2; n++ {
		h.watchBuild(instantiate.Name(h.bc.Name, n))
		req := instantiate.Request{TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}}}
		if n == 2 {
			req.Incremental = ptr.To(true)
		}
		b, err := instantiate.NewStarter(env.Bed.Client, nil).Start(h.ctx, h.ns, h.bc.Name, req)
		g.Expect(err).NotTo(HaveOccurred())
		h.b = b
		b = h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "build %d: %s, platforms: %+v", n, b.Status.Message, b.Status.Platforms)
		img, err := reg.OpenImage(h.ctx, output)
		g.Expect(err).NotTo(HaveOccurred())
		index, _, err := img.Index(h.ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(index.Manifests).To(HaveLen(2))
		for _, m := range index.Manifests {
			artifact, err := img.TopLayerFile(h.ctx, m.Digest, bed.S2IArtifact)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(artifact).To(HaveSuffix(fmt.Sprintf("builds=%d\n", n)), "build %d, the %s child", n, m.Platform.Architecture)
		}
		img.Close()
	}
	logs, err := env.Kubectl(h.ctx, "logs", "-n", h.ns, buildv1.PlatformPodName(h.b.Name, "linux/arm64"))
	g.Expect(err).NotTo(HaveOccurred(), logs)
	g.Expect(logs).To(ContainSubstring("Incremental build: restoring the artifacts of the previous image " + reg.Host + "/" + h.repo + "@sha256:"))
}
