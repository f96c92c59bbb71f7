package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/pkg/build/trigger/binary/artifact"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// starter makes a service account of the harness's namespace bound to the
// shipped archway:build-starter ClusterRole, and returns a kubeconfig
// with its token: a user as kubectl archway sees one.
func (h *harness) starter(name string) string {
	h.t.Helper()
	// The role, and the strategy roles as installed (docker for every
	// authenticated user).
	var role *rbacv1.ClusterRole
	for _, m := range []string{"manifests/authorization/build_starter_role.yaml", "manifests/authorization/build_strategy_roles.yaml"} {
		data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), m))
		if err != nil {
			h.t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				h.t.Fatal(err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if role == nil {
				role = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
			}
			if err := env.Bed.Client.Create(h.ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				h.t.Fatal(err)
			}
		}
	}
	if err := env.Bed.Client.Create(h.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}); err != nil {
		h.t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: h.ns, Name: name}}}
	if err := env.Bed.Client.Create(h.ctx, rb); err != nil {
		h.t.Fatal(err)
	}
	tok, err := env.Bed.Clientset.CoreV1().ServiceAccounts(h.ns).CreateToken(h.ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: env.Bed.Config.Host, CertificateAuthorityData: env.Bed.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: name, Namespace: h.ns}
	cfg.CurrentContext = "bed"
	path := filepath.Join(h.t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// plugin runs kubectl archway with kubeconfig in the harness's namespace.
func (h *harness) plugin(kubeconfig string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig, "-n", h.ns))
	err := cmd.ExecuteContext(h.ctx)
	return out.String(), err
}

// TestBinaryBuildFourPlatforms: a user bound to archway:build-starter runs
// `kubectl archway start-build --platforms <four> --from-dir D --follow`:
// the directory is uploaded once to build-controller's endpoint, each
// platform's pod builds from it (under qemu for the foreign ones), and the
// image of every platform holds the directory's file. --follow exits 0 and
// its last table shows every platform Complete; `logs build/X -f`, started
// while the build runs, follows it to its end (the manifest-list pod's log
// included) and returns only once the Build has ended.
func TestBinaryBuildFourPlatforms(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "binary")
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hello"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: h.output()}
	g.Expect(env.Bed.Client.Create(h.ctx, bc)).To(Succeed())
	h.bc = bc
	user := h.starter("dev")

	dir := t.TempDir()
	const greeting = "hello from a binary build"
	g.Expect(os.WriteFile(filepath.Join(dir, "Dockerfile"),
		[]byte("FROM "+env.Bed.BaseImage+"\nCOPY greeting.txt /greeting.txt\nRUN uname -m > /machine\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte(greeting+"\n"), 0o644)).To(Succeed())

	h.watchBuild("hello-1")
	type result struct {
		out   string
		err   error
		phase buildv1.BuildPhase // the Build's when the command returned
	}
	phaseNow := func() buildv1.BuildPhase {
		b := &buildv1.Build{}
		if err := env.Bed.Client.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "hello-1"}, b); err != nil {
			return buildv1.BuildPhase(err.Error())
		}
		return b.Status.Phase
	}
	started, logs := make(chan result, 1), make(chan result, 1)
	go func() {
		out, err := h.plugin(user, "start-build", "hello", "--platform", strings.Join(framework.Platforms, ","), "--from-dir", dir, "--follow",
			"--build-endpoint", env.WebhookURL, "--build-endpoint-ca", env.WebhookCAFile)
		started <- result{out, err, phaseNow()}
	}()
	running := &buildv1.Build{}
	g.Expect(bed.WaitFor(h.ctx, env.Bed.Client, client.ObjectKey{Namespace: h.ns, Name: "hello-1"}, running, func(b *buildv1.Build) bool {
		return b.Status.Phase == buildv1.BuildPhaseRunning || b.Status.Phase.IsTerminal()
	})).To(Succeed())
	g.Expect(running.Status.Phase).To(Equal(buildv1.BuildPhaseRunning), "the build ended before logs -f could follow it")
	go func() {
		out, err := h.plugin(user, "logs", "build/hello-1", "-f")
		logs <- result{out, err, phaseNow()}
	}()

	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	g.Expect(b.Spec.Source.Binary.Artifact).To(HavePrefix(env.Bed.Registry.Host + "/" + h.repo + "@sha256:"))
	var s, l result
	select {
	case s = <-started:
	case <-time.After(bed.LongTimeout):
		t.Fatal("start-build --follow still running a minute after the build ended")
	}
	g.Expect(s.err).NotTo(HaveOccurred(), s.out)
	// Off a terminal, --follow prints the final table once, after its
	// change lines.
	tables := strings.Split(s.out, "\nbuild hello-1 ")
	last := tables[len(tables)-1]
	g.Expect(last).To(HavePrefix("Complete"), s.out)
	for _, p := range framework.Platforms {
		g.Expect(last).To(MatchRegexp(`(?m)^`+regexp.QuoteMeta(p)+`\s+Complete\s`), "last table: %s", last)
		g.Expect(s.out).To(ContainSubstring("["+p+"] "), "--follow streams %s's log", p)
	}
	select {
	case l = <-logs:
	case <-time.After(bed.LongTimeout):
		t.Fatal("logs -f still running a minute after the build ended")
	}
	g.Expect(l.err).NotTo(HaveOccurred(), l.out)
	g.Expect(l.phase.IsTerminal()).To(BeTrue(), "logs -f returned while the build was %s", l.phase)
	for _, p := range append(framework.Platforms, "manifest-list") {
		g.Expect(l.out).To(ContainSubstring("["+p+"] "), "logs -f shows %s", p)
	}
	g.Expect(l.out).To(ContainSubstring("uname -m > /machine"))

	// The manifest-list pod, once every platform had read the input,
	// removed its tag with the per-platform ones: only the output's is left.
	h.waitCleanup()
	g.Expect(h.tags()).To(Equal([]string{"v1"}))

	greetings, err := indexChildren(h.ctx, h.output(), "/greeting.txt")
	g.Expect(err).NotTo(HaveOccurred())
	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(framework.UnameOf))
	for _, p := range framework.Platforms {
		g.Expect(greetings[p]).To(Equal(greeting), "the %s image's /greeting.txt", p)
	}
}

// TestSinglePlatformBinaryBuildRemovesInput: a binary build of one
// platform (its pod pushes the output itself, no manifest-list pod) and a
// classic one (no platforms; the BuildConfig's nodeSelector leaves one
// architecture) each leave only the output's tag: their one build pod
// removed the uploaded input's sha256-<hex>.binary tag once the build was
// over.
func TestSinglePlatformBinaryBuildRemovesInput(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "binary-one")
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hello"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: h.output()}
	bc.Spec.NodeSelector = buildv1.OptionalNodeSelector{corev1.LabelArchStable: "amd64"}
	g.Expect(env.Bed.Client.Create(h.ctx, bc)).To(Succeed())
	h.bc = bc
	user := h.starter("dev")
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "Dockerfile"),
		[]byte("FROM "+env.Bed.BaseImage+"\nCOPY greeting.txt /greeting.txt\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte("hello\n"), 0o644)).To(Succeed())

	for i, c := range []struct {
		name     string
		platform []string
	}{
		{name: "one platform", platform: []string{"--platforms", "linux/amd64"}},
		{name: "classic"},
	} {
		name := fmt.Sprintf("hello-%d", i+1)
		h.watchBuild(name)
		args := append([]string{"start-build", "hello", "--from-dir", dir, "--wait",
			"--build-endpoint", env.WebhookURL, "--build-endpoint-ca", env.WebhookCAFile}, c.platform...)
		out, err := h.plugin(user, args...)
		g.Expect(err).NotTo(HaveOccurred(), "%s: %s", c.name, out)
		b := h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "%s: message %s, platforms %+v", c.name, b.Status.Message, b.Status.Platforms)
		g.Expect(b.Status.Platforms).To(HaveLen(len(c.platform)/2), "%s: %d status entries", c.name, len(b.Status.Platforms))
		g.Expect(b.Spec.Source.Binary.Artifact).To(HavePrefix(env.Bed.Registry.Host+"/"+h.repo+"@sha256:"), c.name)
		g.Expect(h.pods()).NotTo(HaveKey(ContainSubstring("manifest-list")), "%s: no manifest-list pod", c.name)
		g.Expect(h.tags()).To(Equal([]string{"v1"}), "%s: the output's tag alone, the input's removed", c.name)
	}
}

// TestTamperedBinaryInputFailsBuild: a Build whose binary input's bytes in
// the registry no longer match its digest fails FetchSourceFailed in the
// build pod, before the archive is extracted: nothing is built or pushed.
func TestTamperedBinaryInputFailsBuild(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "tamper")
	repo := env.Bed.Registry.Host + "/" + h.repo
	archive := tarGz(t, map[string]string{"Dockerfile": "FROM " + env.Bed.BaseImage + "\nRUN echo built > /built\n"})
	ref, err := artifact.Store(h.ctx, registry.Access{}, repo, bytes.NewReader(archive), "archive")
	g.Expect(err).NotTo(HaveOccurred())
	// The registry now serves other bytes under the layer's digest.
	layer := blobOf(t, archive)
	g.Expect(os.WriteFile(layer, bytes.Repeat([]byte{0}, int(fileSize(t, layer))), 0o644)).To(Succeed())

	h.watchBuild("tampered")
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "tampered"}}
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{Artifact: ref}}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: h.output()}
	b.Spec.Platforms = []string{"linux/amd64"}
	g.Expect(env.Bed.Client.Create(h.ctx, b)).To(Succeed())
	b = h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "platforms: %+v", b.Status.Platforms)
	g.Expect(b.Status.Platforms).To(HaveLen(1))
	g.Expect(b.Status.Platforms[0].Reason).To(Equal(buildv1.StatusReasonFetchSourceFailed))
	g.Expect(b.Status.Platforms[0].Message).To(ContainSubstring(artifact.ErrTampered.Error()))
	// Nothing was pushed, and the one build pod removed the input's tag.
	g.Expect(h.tags()).To(BeEmpty(), "no image pushed and no input's tag left")
}

// blobOf is the file of the registry's storage holding the artifact layer
// of archive: the blob whose gzip stream carries it.
func blobOf(t *testing.T, archive []byte) string {
	t.Helper()
	blobs, _ := filepath.Glob(filepath.Join(env.Bed.Registry.Dir, "docker/registry/v2/blobs/sha256/*/*/data"))
	for _, p := range blobs {
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, archive[:min(len(archive), 1000)]) {
			return p
		}
	}
	t.Fatal("the artifact's layer is not in the registry's storage")
	return ""
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// tarGz is a gzipped tar of files (name -> content).
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
