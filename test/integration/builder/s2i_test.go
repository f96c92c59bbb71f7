package builder_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

var (
	s2iBuilderOnce sync.Mutex
	s2iBuilderRef  string
)

// s2iBuilder builds the test source-to-image builder image
// (bed.S2IBuilderFiles) for the four platforms with `builder build`, once
// per test binary, and returns its reference.
func s2iBuilder(t *testing.T) string {
	t.Helper()
	s2iBuilderOnce.Lock()
	defer s2iBuilderOnce.Unlock()
	if s2iBuilderRef != "" {
		return s2iBuilderRef
	}
	dir := t.TempDir()
	for name, content := range bed.S2IBuilderFiles(theBed.BaseImage) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := theBed.Registry.Host + "/it/s2i-builder:v1"
	log, code := runBuilder(t, nil, "build", "--platform", strings.Join(fourPlatforms, ","), "-t", ref, dir)
	if code != 0 {
		t.Fatalf("building the S2I builder image:\n%s", log)
	}
	s2iBuilderRef = ref
	return ref
}

// sourceBuild is a Source-strategy Build of a Git repository's app
// directory with builder as the builder image.
func sourceBuild(repo, builder, output string, env []corev1.EnvVar) *buildv1.Build {
	b := newBuild("s2i-ns", "s2i-1", "", output, nil, nil)
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit,
		Git: &buildv1.GitBuildSource{URI: "file://" + repo, Ref: "feature"}, ContextDir: "app"}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}, Env: env}}
	return b
}

// runSourceBuild runs `builder docker-build` as the pod of platform p
// would, and returns its log and exit code.
func runSourceBuild(t *testing.T, b *buildv1.Build, p string) (string, int) {
	t.Helper()
	return runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, p)}, "docker-build", "--no-report", "--allow-file-git-uris")
}

// artifactOf reads the S2I artifact from the top layer (assemble's) of the
// image the pod of platform p pushed for output, and the image's config.
func artifactOf(t *testing.T, g Gomega, output, p string) (string, []string, string) {
	t.Helper()
	tag, err := platform.Tag(output, p)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := theBed.Registry.OpenImage(t.Context(), tag)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	repo, ref, _ := strings.Cut(strings.TrimPrefix(tag, theBed.Registry.Host+"/"), ":")
	d, err := theBed.Registry.ManifestDigest(t.Context(), repo, ref)
	g.Expect(err).NotTo(HaveOccurred())
	artifact, err := img.TopLayerFile(t.Context(), digestOf(d), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred(), "%s of the %s image", bed.S2IArtifact, p)
	cfg, err := img.Config(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	return artifact, cfg.Config.Cmd, cfg.Config.User
}

// TestSourceBuildFourPlatforms builds a Git source with the Source strategy
// for four platforms, as four build pods would at once, from a builder
// image made here for those four: each platform's image holds what its
// builder image's assemble compiled on that machine, with the source's
// .s2i/environment, runs the image's run script, and keeps the builder
// image's labels.
func TestSourceBuildFourPlatforms(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	repo, _ := gitRepo(t, map[string]string{
		"app/main.txt":         "hello from s2i",
		"app/.s2i/environment": "# the source's settings\nGREETING=from-file\n",
	})
	output := theBed.Registry.Host + "/it/s2i-app:v1"
	b := sourceBuild(repo, builder, output, nil)

	logs := make(map[string]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range fourPlatforms {
		wg.Go(func() {
			log, code := runSourceBuild(t, b, p)
			mu.Lock()
			defer mu.Unlock()
			logs[p] = log
			if code != 0 {
				t.Errorf("%s: exit %d\n%s", p, code, log)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, p := range fourPlatforms {
		g.Expect(logs[p]).To(ContainSubstring("RUN /usr/libexec/s2i/assemble"), "%s runs the image's assemble", p)
		g.Expect(logs[p]).To(ContainSubstring("assembling on "+unameOf[p]+" as 1001"), "%s assembles as the label's user", p)
		artifact, cmd, user := artifactOf(t, g, output, p)
		g.Expect(artifact).To(ContainSubstring("hello from s2i"), "%s: the source was compiled", p)
		g.Expect(artifact).To(ContainSubstring("machine="+unameOf[p]+"\n"), "%s: compiled on its own machine", p)
		g.Expect(artifact).To(ContainSubstring("greeting=from-file\n"), "%s: .s2i/environment reaches assemble", p)
		g.Expect(artifact).To(ContainSubstring("assembler=image\n"), p)
		g.Expect(cmd).To(Equal([]string{"/bin/sh", "-c", bed.S2IScriptsDir + "/run"}), "%s: the image runs the run script", p)
		g.Expect(user).To(Equal("1001"), p)
	}
	tag, _ := platform.Tag(output, "linux/arm64")
	img, err := theBed.Registry.OpenImage(t.Context(), tag)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	labels, err := img.Labels(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(labels).To(HaveKeyWithValue("io.openshift.expose-services", "8080:http"), "the builder image's labels are kept")
	g.Expect(labels).To(HaveKeyWithValue("io.openshift.s2i.scripts-url", "image://"+bed.S2IScriptsDir))
	g.Expect(labels).To(HaveKeyWithValue("io.openshift.build.source-context-dir", "app"))
	g.Expect(labels["io.openshift.s2i.build.image"]).To(HavePrefix(theBed.Registry.Host+"/it/s2i-builder@sha256:"),
		"the builder image of the platform, by digest")
}

// TestSourceBuildOverrides: the strategy's env wins over the source's
// .s2i/environment, and the source's .s2i/bin/assemble replaces the
// builder image's (its run is still the image's).
func TestSourceBuildOverrides(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	repo, _ := gitRepo(t, map[string]string{
		"app/main.txt":         "overridden",
		"app/.s2i/environment": "GREETING=from-file\n",
		"app/.s2i/bin/assemble": "#!/bin/sh\nset -e\n" +
			"{ cat /tmp/src/main.txt; echo \"machine=$(uname -m)\"; echo \"greeting=$GREETING\"; echo assembler=source; } > " + bed.S2IArtifact + "\n",
	})
	output := theBed.Registry.Host + "/it/s2i-override:v1"
	b := sourceBuild(repo, builder, output, []corev1.EnvVar{{Name: "GREETING", Value: "from-strategy"}})
	log, code := runSourceBuild(t, b, "linux/ppc64le")
	g.Expect(code).To(Equal(0), log)
	g.Expect(log).To(ContainSubstring("RUN /tmp/scripts/assemble"))
	artifact, cmd, _ := artifactOf(t, g, output, "linux/ppc64le")
	g.Expect(artifact).To(ContainSubstring("assembler=source\n"), "the source's assemble ran")
	g.Expect(artifact).To(ContainSubstring("machine=ppc64le\n"))
	g.Expect(artifact).To(ContainSubstring("greeting=from-strategy\n"), "the strategy's env wins")
	g.Expect(cmd).To(Equal([]string{"/bin/sh", "-c", bed.S2IScriptsDir + "/run"}), "run is still the image's")
}

// TestSourceBuildBuilderImageLacksPlatform: a platform the builder image
// does not have fails before anything is built, naming the image and the
// platforms it has.
func TestSourceBuildBuilderImageLacksPlatform(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	repo, _ := gitRepo(t, map[string]string{"app/main.txt": "x"})
	b := sourceBuild(repo, builder, theBed.Registry.Host+"/it/s2i-riscv:v1", nil)
	log, code := runSourceBuild(t, b, "linux/riscv64")
	g.Expect(code).To(Equal(1), log)
	g.Expect(log).To(ContainSubstring("PullBuilderImageFailed: builder image " + builder + " has no image for linux/riscv64; " +
		"it has linux/amd64, linux/arm64/v8, linux/ppc64le, linux/s390x: use a builder image that has linux/riscv64"))
	g.Expect(log).NotTo(ContainSubstring("STEP 1/"), "nothing was built")
}

// TestSourceBuildRefusesFileScripts: a scripts URL that would copy the
// build pod's own files into the image is refused.
func TestSourceBuildRefusesFileScripts(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	repo, _ := gitRepo(t, map[string]string{"app/main.txt": "x"})
	secrets := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(secrets, "assemble"), []byte("#!/bin/sh\necho stolen\n"), 0o755)).To(Succeed())
	b := sourceBuild(repo, builder, theBed.Registry.Host+"/it/s2i-file:v1", nil)
	b.Spec.Strategy.SourceStrategy.Scripts = "file://" + secrets
	log, code := runSourceBuild(t, b, "linux/amd64")
	g.Expect(code).To(Equal(1), log)
	g.Expect(log).To(ContainSubstring(`scheme "file" is not supported`))
	g.Expect(log).NotTo(ContainSubstring("STEP 1/"))
}

// TestSourceBuildIncremental builds a Source Build twice, incremental: the
// first build has no previous image and builds in full; the second runs
// save-artifacts in the first one's image and restores what it saved
// before assemble, whose artifact counts the builds.
func TestSourceBuildIncremental(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	repo, _ := gitRepo(t, map[string]string{"app/main.txt": "incremental\n"})
	output := theBed.Registry.Host + "/it/s2i-incremental:v1"
	b := sourceBuild(repo, builder, output, nil)
	b.Spec.Strategy.SourceStrategy.Incremental = ptr.To(true)
	build := func() string {
		t.Helper()
		// One platform: the pod pushes to the output itself, which is the
		// previous image of the next build.
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "")}, "docker-build", "--no-report", "--allow-file-git-uris")
		g.Expect(code).To(Equal(0), log)
		return log
	}
	log := build()
	g.Expect(log).To(ContainSubstring("No previous image for "))
	artifact := topLayerArtifact(t, g, output)
	g.Expect(artifact).To(ContainSubstring("builds=1\n"), "the first build is a full one")

	log = build()
	g.Expect(log).To(ContainSubstring("Incremental build: restoring the artifacts of the previous image " + theBed.Registry.Host + "/it/s2i-incremental@sha256:"))
	g.Expect(log).To(ContainSubstring("save-artifacts"))
	g.Expect(topLayerArtifact(t, g, output)).To(ContainSubstring("builds=2\n"), "the second build restored the first one's artifact")
}

// TestSourceBuildIncrementalPushCredentials: the output is on the registry
// that requires a password, and the build's pull secret has a wrong one
// for it. An incremental build reads the previous image, which is in the
// output's repository, with the push secret's credentials, as OpenShift's
// builder pulls it, and restores its artifacts; read with the pull
// credentials, the previous image is refused and the second build is a
// full one (builds=1 again).
func TestSourceBuildIncrementalPushCredentials(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	reg := theBed.AuthRegistry
	repo, _ := gitRepo(t, map[string]string{"app/main.txt": "incremental, behind a password\n"})
	output := reg.Host + "/it/s2i-incremental-auth:v1"
	b := sourceBuild(repo, builder, output, nil)
	b.Spec.Strategy.SourceStrategy.Incremental = ptr.To(true)
	env := []string{
		buildv1.BuildEnv + "=" + podBuildJSON(t, b, ""),
		buildv1.PushDockerConfigPathEnv + "=" + authFile(t, reg.Host, reg.Username, reg.Password),
		buildv1.PullDockerConfigPathEnv + "=" + authFile(t, reg.Host, reg.Username, "not-the-password"),
	}
	log, code := runBuilder(t, env, "docker-build", "--no-report", "--allow-file-git-uris")
	g.Expect(code).To(Equal(0), log)
	g.Expect(log).To(ContainSubstring("No previous image for "))
	g.Expect(topLayerArtifactIn(t, g, reg, output)).To(ContainSubstring("builds=1\n"))

	log, code = runBuilder(t, env, "docker-build", "--no-report", "--allow-file-git-uris")
	g.Expect(code).To(Equal(0), log)
	g.Expect(log).To(ContainSubstring("Incremental build: restoring the artifacts of the previous image " + reg.Host + "/it/s2i-incremental-auth@sha256:"))
	g.Expect(topLayerArtifactIn(t, g, reg, output)).To(ContainSubstring("builds=2\n"),
		"the second build restored the first one's artifact, read with the push credentials")
	g.Expect(log).NotTo(ContainSubstring("not-the-password"))
}

// kubeletSecret writes a Secret's keys under dir/name as the kubelet mounts
// a secret volume: each key a link into a ..data directory.
func kubeletSecret(t *testing.T, dir, name string, keys map[string]string) {
	t.Helper()
	data := filepath.Join(dir, name, "..2026_11_29_13_00_00.1")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, name, "..data")); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, name, k)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSourceBuildSecrets builds a Source Build with two source.secrets
// and a source.configMaps, mounted as a build pod has them, for amd64 and
// arm64: assemble (the source's own) reads one Secret's keys at its
// destinationDir relative to the builder image's working directory and the
// other's at an absolute one, owned by the assemble user; no layer of the
// pushed images holds the Secrets' keys, under any name, nor their values.
// The ConfigMap's key is in the working directory too, and stays in the
// image, as OpenShift's builder leaves it.
func TestSourceBuildSecrets(t *testing.T) {
	g := NewWithT(t)
	builder := s2iBuilder(t)
	token := "tok-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secrets := t.TempDir()
	kubeletSecret(t, secrets, "npm-creds", map[string]string{"token": token, "user": "builder-bot"})
	kubeletSecret(t, secrets, "company-ca", map[string]string{"ca.crt": "CA-" + token})
	configMaps := t.TempDir()
	kubeletSecret(t, configMaps, "settings", map[string]string{"app.conf": "level=debug\n"})
	repo, _ := gitRepo(t, map[string]string{
		"app/main.txt": "with secrets\n",
		"app/.s2i/bin/assemble": "#!/bin/sh\nset -e\necho \"assembling in $(pwd)\"\nls -ln creds /etc/pki/app\n" +
			"{ cat /tmp/src/main.txt; echo \"machine=$(uname -m)\"; echo \"token-sha=$(sha256sum creds/token | cut -d' ' -f1)\"; " +
			"echo \"user=$(cat creds/user)\"; echo \"ca-sha=$(sha256sum /etc/pki/app/ca.crt | cut -d' ' -f1)\"; cat conf/app.conf; } > " + bed.S2IArtifact + "\n",
	})
	output := theBed.Registry.Host + "/it/s2i-secrets:v1"
	b := sourceBuild(repo, builder, output, nil)
	b.Spec.Source.Secrets = []buildv1.SecretBuildSource{
		{Secret: corev1.LocalObjectReference{Name: "npm-creds"}, DestinationDir: "creds"},
		{Secret: corev1.LocalObjectReference{Name: "company-ca"}, DestinationDir: "/etc/pki/app"},
	}
	b.Spec.Source.ConfigMaps = []buildv1.ConfigMapBuildSource{{ConfigMap: corev1.LocalObjectReference{Name: "settings"}, DestinationDir: "conf"}}
	sha := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, p)},
			"docker-build", "--no-report", "--allow-file-git-uris", "--build-secrets-dir", secrets, "--build-configmaps-dir", configMaps)
		g.Expect(code).To(Equal(0), log)
		g.Expect(log).To(ContainSubstring("Secrets for assemble, left out of the image: /etc/pki/app/ca.crt " +
			bed.S2IWorkDir + "/creds/token " + bed.S2IWorkDir + "/creds/user\n"))
		g.Expect(log).To(ContainSubstring("assembling in " + bed.S2IWorkDir + "\n"))
		g.Expect(log).To(MatchRegexp(`-rw-r--r-- +1 1001 +0 .* token`), "the keys are the assemble user's")
		g.Expect(log).NotTo(ContainSubstring(token), "the build log")
		artifact, _, _ := artifactOf(t, g, output, p)
		g.Expect(artifact).To(Equal("with secrets\nmachine=" + unameOf[p] + "\ntoken-sha=" + sha(token) + "\nuser=builder-bot\nca-sha=" + sha("CA-"+token) + "\nlevel=debug\n"))

		tag, err := platform.Tag(output, p)
		g.Expect(err).NotTo(HaveOccurred())
		img, err := theBed.Registry.OpenImage(t.Context(), tag)
		g.Expect(err).NotTo(HaveOccurred())
		repoName, ref, _ := strings.Cut(strings.TrimPrefix(tag, theBed.Registry.Host+"/"), ":")
		d, err := theBed.Registry.ManifestDigest(t.Context(), repoName, ref)
		g.Expect(err).NotTo(HaveOccurred())
		entries, err := img.LayerEntries(t.Context(), digestOf(d))
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := img.Config(t.Context())
		img.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(entries)).To(BeNumerically(">", 10))
		g.Expect(entries).To(ContainElement(And(HaveField("Name", strings.TrimPrefix(bed.S2IWorkDir, "/")+"/conf/app.conf"),
			HaveField("Content", []byte("level=debug\n")))), "%s: the ConfigMap's key stays in the image", p)
		for _, e := range entries {
			g.Expect(e.Name).NotTo(Or(HaveSuffix("creds/token"), HaveSuffix("creds/user"), HaveSuffix("ca.crt"), ContainSubstring("creds/")),
				"%s: layer %d", p, e.Layer)
			g.Expect(string(e.Content)).NotTo(ContainSubstring(token), "%s: layer %d's %s", p, e.Layer, e.Name)
		}
		for _, h := range cfg.History {
			g.Expect(h.CreatedBy).NotTo(ContainSubstring(token), "%s: the image's history", p)
		}
	}
}

// topLayerArtifact reads the S2I artifact from the top layer of the image
// ref names.
func topLayerArtifact(t *testing.T, g Gomega, ref string) string {
	t.Helper()
	return topLayerArtifactIn(t, g, theBed.Registry, ref)
}

// topLayerArtifactIn is topLayerArtifact for an image of reg.
func topLayerArtifactIn(t *testing.T, g Gomega, reg *bed.Registry, ref string) string {
	t.Helper()
	img, err := reg.OpenImage(t.Context(), ref)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	repo, tag, _ := strings.Cut(strings.TrimPrefix(ref, reg.Host+"/"), ":")
	d, err := reg.ManifestDigest(t.Context(), repo, tag)
	g.Expect(err).NotTo(HaveOccurred())
	artifact, err := img.TopLayerFile(t.Context(), digestOf(d), bed.S2IArtifact)
	g.Expect(err).NotTo(HaveOccurred())
	return artifact
}

// TestSourceBuildLayerCache builds Source Builds with a layer cache in the
// registry, each in a work directory of its own as build pods do: the same
// source, builder image and environment reuse the first build's result
// (no step runs), and a changed source file, strategy env, or builder
// image behind the same tag never does.
func TestSourceBuildLayerCache(t *testing.T) {
	g := NewWithT(t)
	const p = "linux/amd64"
	// A builder image of its own, rebuilt under the same tag below.
	builder := theBed.Registry.Host + "/it/s2i-lc-builder:v1"
	pushBuilder := func(files map[string]string) {
		t.Helper()
		dir := t.TempDir()
		for name, content := range files {
			g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
		}
		log, code := runBuilder(t, nil, "build", "--platform", p, "-t", builder, dir)
		g.Expect(code).To(Equal(0), log)
	}
	files := bed.S2IBuilderFiles(theBed.BaseImage)
	pushBuilder(files)

	repoV1, _ := gitRepo(t, map[string]string{"app/main.txt": "v1\n", "app/.s2i/environment": "GREETING=from-file\n"})
	repoV2, _ := gitRepo(t, map[string]string{"app/main.txt": "v2\n", "app/.s2i/environment": "GREETING=from-file\n"})
	output := theBed.Registry.Host + "/it/s2i-lc:v1"
	run := func(repo string, env []corev1.EnvVar) (string, string) {
		t.Helper()
		b := sourceBuild(repo, builder, output, env)
		b.Spec.Strategy.SourceStrategy.LayerCache = &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry, Repository: theBed.Registry.Host + "/it/s2i-lc-cache"}
		log, code := runSourceBuild(t, b, p)
		g.Expect(code).To(Equal(0), log)
		tag, err := platform.Tag(output, p)
		g.Expect(err).NotTo(HaveOccurred())
		return log, topLayerArtifact(t, g, tag)
	}

	log, artifact := run(repoV1, nil)
	g.Expect(builtSteps(log)).To(BeTrue(), "the first build runs its steps:\n%s", log)
	g.Expect(artifact).To(HavePrefix("v1\n"))

	log, artifact = run(repoV1, nil)
	g.Expect(builtSteps(log)).To(BeFalse(), "the same inputs (another clone) reuse the result:\n%s", log)
	g.Expect(log).To(ContainSubstring("from the layer cache"))
	g.Expect(artifact).To(HavePrefix("v1\n"))

	log, artifact = run(repoV2, nil)
	g.Expect(builtSteps(log)).To(BeTrue(), "a changed source file builds:\n%s", log)
	g.Expect(artifact).To(HavePrefix("v2\n"))

	log, artifact = run(repoV1, []corev1.EnvVar{{Name: "GREETING", Value: "from-strategy"}})
	g.Expect(builtSteps(log)).To(BeTrue(), "a changed env builds:\n%s", log)
	g.Expect(artifact).To(ContainSubstring("greeting=from-strategy\n"))

	files["s2i/assemble"] = strings.Replace(files["s2i/assemble"], "assembler=image", "assembler=image-v2", 1)
	pushBuilder(files)
	log, artifact = run(repoV1, nil)
	g.Expect(builtSteps(log)).To(BeTrue(), "another builder image under the same tag builds:\n%s", log)
	g.Expect(artifact).To(ContainSubstring("assembler=image-v2\n"))
}
