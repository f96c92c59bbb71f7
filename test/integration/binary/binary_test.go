package binary

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/binary/artifact"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/registry"
)

// fetchAsBuilder reads the Build's binary input as a build pod does
// (Download with the digest checks, then source.Fetch's extraction) and
// returns the directory it was extracted into.
func (h *harness) fetchAsBuilder(b *buildv1.Build) (string, error) {
	h.t.Helper()
	dir := h.t.TempDir()
	rc, err := artifact.Download(h.ctx, registry.Access{}, b.Spec.Source.Binary.Artifact,
		testBed.Registry.Host+"/"+h.repo(), dir, source.DefaultArchiveLimits.MaxBytes)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	out := filepath.Join(dir, "source")
	_, err = source.Fetch(h.ctx, source.Options{Source: b.Spec.Source, Binary: rc}, out)
	return out, err
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestStartBinaryBuild: a user bound to archway:build-starter starts binary
// builds with --from-dir, --from-file and --from-archive through the
// endpoint; each Build names one artifact in the output repository by
// digest (stored once: one tag per upload), with OpenShift's asFile, and a
// builder reading it gets the uploaded files.
func TestStartBinaryBuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "binary-start")
	h.buildConfig("app", false)
	alice := h.user("alice", "archway:build-starter")

	dir := t.TempDir()
	for name, content := range map[string]string{"Dockerfile": "FROM scratch\nCOPY . /src\n", "hello.txt": "hello from the dir\n", "sub/deep.txt": "deep\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("hello.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	out, err := h.plugin(alice, "start-build", "app", "--from-dir", dir, "--platforms", "linux/amd64,linux/s390x", "--commit", "9f1c2e9b")
	if err != nil || out != "build.build.openshift.io/app-1 started\n" {
		t.Fatalf("start-build --from-dir: %v, %q", err, out)
	}
	b := h.build("app-1")
	art := b.Spec.Source.Binary.Artifact
	if !strings.HasPrefix(art, testBed.Registry.Host+"/"+h.repo()+"@sha256:") || b.Spec.Source.Type != buildv1.BuildSourceBinary ||
		strings.Join(b.Spec.Platforms, ",") != "linux/amd64,linux/s390x" || b.Spec.Revision == nil || b.Spec.Revision.Git.Commit != "9f1c2e9b" ||
		b.Spec.TriggeredBy[0].Message != instantiate.CauseManual {
		t.Fatalf("app-1: source %+v, platforms %v, revision %+v", b.Spec.Source, b.Spec.Platforms, b.Spec.Revision)
	}
	dgst := art[strings.Index(art, "@")+1:]
	if tags := h.tags(); len(tags) != 1 || tags[0] != artifact.Tag(dgst) {
		t.Errorf("tags of the output repository: %v, want the artifact's one tag %s", tags, artifact.Tag(dgst))
	}
	got, err := h.fetchAsBuilder(b)
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(got, "hello.txt")) != "hello from the dir\n" || readFile(t, filepath.Join(got, "sub/deep.txt")) != "deep\n" {
		t.Errorf("extracted files differ")
	}
	if link, err := os.Readlink(filepath.Join(got, "link.txt")); err != nil || link != "hello.txt" {
		t.Errorf("link.txt: %q, %v", link, err)
	}

	// --from-file: the file, stored as asFile.
	df := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(df, []byte("FROM scratch\nLABEL from=file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h.plugin(alice, "start-build", "app", "--from-file", df, "-o", "name"); err != nil || out != "build.build.openshift.io/app-2\n" {
		t.Fatalf("start-build --from-file: %v, %q", err, out)
	}
	b = h.build("app-2")
	if b.Spec.Source.Binary.AsFile != "Dockerfile" {
		t.Errorf("app-2 asFile = %q, want Dockerfile", b.Spec.Source.Binary.AsFile)
	}
	if got, err := h.fetchAsBuilder(b); err != nil || readFile(t, filepath.Join(got, "Dockerfile")) != "FROM scratch\nLABEL from=file\n" {
		t.Errorf("app-2's file: %v", err)
	}

	// --from-archive: a zip, sent as it is.
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for name, content := range map[string]string{"Dockerfile": "FROM scratch\n", "data/z.txt": "zipped\n"} {
		w, _ := zw.Create(name)
		_, _ = w.Write([]byte(content))
	}
	_ = zw.Close()
	zf := filepath.Join(t.TempDir(), "src.zip")
	if err := os.WriteFile(zf, zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := h.plugin(alice, "start-build", "app", "--from-archive", zf, "-o", "name"); err != nil || out != "build.build.openshift.io/app-3\n" {
		t.Fatalf("start-build --from-archive: %v, %q", err, out)
	}
	if got, err := h.fetchAsBuilder(h.build("app-3")); err != nil || readFile(t, filepath.Join(got, "data/z.txt")) != "zipped\n" {
		t.Errorf("app-3's archive: %v", err)
	}
	if tags := h.tags(); len(tags) != 3 {
		t.Errorf("three uploads left tags %v, want three", tags)
	}

	// A binary BuildConfig without an input is refused by the plugin.
	if _, err := h.plugin(alice, "start-build", "app"); err == nil || !strings.Contains(err.Error(), "give --from-dir, --from-file, --from-archive or --from-repo") {
		t.Errorf("start-build without an input: %v", err)
	}
}

// TestBinaryBuildRefused: every refusal is clear, and leaves no Build,
// no number taken and nothing stored: a user without
// buildconfigs/instantiatebinary (403), no token (401), an upload over the
// limit (413), a BuildConfig that is not binary (400), platforms the API
// refuses (422, its message), an unknown BuildConfig (404), GET (405).
func TestBinaryBuildRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "binary-refused")
	h.buildConfig("app", false)
	h.buildConfig("gitapp", true)
	bob := h.user("bob", "")
	alice := h.user("alice", "archway:build-starter")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := h.plugin(bob, "start-build", "app", "--from-dir", dir)
	want := `binary build refused (403 Forbidden): User "system:serviceaccount:` + h.ns + `:bob" cannot create resource "buildconfigs/instantiatebinary" in API group "build.openshift.io" in the namespace "` + h.ns + `"`
	if err == nil || err.Error() != want {
		t.Errorf("bob: %v\nwant %s", err, want)
	}
	_, err = h.plugin(alice, "start-build", "gitapp", "--from-dir", dir)
	if err == nil || !strings.Contains(err.Error(), `(400 Bad Request): buildconfig "gitapp" has source type Git: binary builds need source type Binary`) {
		t.Errorf("git BuildConfig: %v", err)
	}
	_, err = h.plugin(alice, "start-build", "nope", "--from-dir", dir)
	if err == nil || !strings.Contains(err.Error(), `buildconfig "nope" not found in namespace "`+h.ns+`"; its BuildConfigs: app, gitapp`) {
		t.Errorf("unknown BuildConfig: %v", err)
	}
	_, err = h.plugin(alice, "start-build", "app", "--from-dir", dir, "--platforms", "linux/amd64,linux/arm64/v8,linux/arm64")
	if err == nil || !strings.Contains(err.Error(), `(422 Unprocessable Entity): `) ||
		!strings.Contains(err.Error(), `"linux/arm64" is the same platform as "linux/arm64/v8"; remove one of them`) {
		t.Errorf("duplicate platforms: %v", err)
	}

	// Paused, and an empty upload.
	paused := &buildv1.BuildConfig{}
	if err := testBed.Client.Get(h.ctx, clientKey(h.ns, "app"), paused); err != nil {
		t.Fatal(err)
	}
	paused.Annotations = map[string]string{buildv1.BuildConfigPausedAnnotation: "true"}
	if err := testBed.Client.Update(h.ctx, paused); err != nil {
		t.Fatal(err)
	}
	_, err = h.plugin(alice, "start-build", "app", "--from-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "(409 Conflict): the BuildConfig is paused") {
		t.Errorf("paused BuildConfig: %v", err)
	}
	delete(paused.Annotations, buildv1.BuildConfigPausedAnnotation)
	if err := testBed.Client.Update(h.ctx, paused); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = h.plugin(alice, "start-build", "app", "--from-file", empty)
	if err == nil || !strings.Contains(err.Error(), "(400 Bad Request): the upload is empty") {
		t.Errorf("empty upload: %v", err)
	}

	// Over the limit: 64 KiB of random bytes against a 16 KiB limit.
	h.handler.MaxBytes = 16 << 10
	big := make([]byte, 64<<10)
	_, _ = rand.Read(big)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = h.plugin(alice, "start-build", "app", "--from-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "(413 Request Entity Too Large): the upload is larger than 16384 bytes, the limit") {
		t.Errorf("oversize upload: %v", err)
	}
	h.handler.MaxBytes = 0

	// No token, and GET.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(t, h.caFile)}}
	u := h.url + "/apis/build.openshift.io/v1/namespaces/" + h.ns + "/buildconfigs/app/instantiatebinary"
	resp, err := client.Post(u, "application/octet-stream", strings.NewReader("x"))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %v %v", resp, err)
	}
	resp, err = client.Get(u)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp, err)
	}

	if names := h.builds(); len(names) != 0 {
		t.Errorf("refused starts created builds %v", names)
	}
	if tags := h.tags(); len(tags) != 0 {
		t.Errorf("refused starts stored %v", tags)
	}
	bc := &buildv1.BuildConfig{}
	if err := testBed.Client.Get(h.ctx, clientKey(h.ns, "app"), bc); err != nil || bc.Status.LastVersion != 0 {
		t.Errorf("lastVersion %d after refusals (%v), want 0", bc.Status.LastVersion, err)
	}
	// The same upload by alice goes through: the refusals were the checks.
	if _, err := h.plugin(alice, "start-build", "app", "--from-dir", dir); err != nil {
		t.Errorf("alice: %v", err)
	}
}

// TestArtifactField: spec.source.binary.artifact takes only a reference by
// digest, with the CRD's message.
func TestArtifactField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "binary-field")
	for _, bad := range []string{"registry.example.com/app:latest", "registry.example.com/app@sha256:abc", "x @sha256:" + strings.Repeat("a", 64)} {
		b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, GenerateName: "b-"}}
		b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{Artifact: bad}}
		b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
		err := testBed.Client.Create(h.ctx, b)
		if err == nil || !strings.Contains(err.Error(), "artifact must be an image reference by digest") {
			t.Errorf("artifact %q: %v", bad, err)
		}
	}
}

// TestTamperedArtifactRefused: the registry returning other bytes under
// the artifact's digest (its stored blob overwritten, same size) fails the
// download before anything reaches extraction.
func TestTamperedArtifactRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "binary-tamper")
	repo := testBed.Registry.Host + "/" + h.repo()
	content := bytes.Repeat([]byte("the real archive "), 1000)
	ref, err := artifact.Store(h.ctx, registry.Access{}, repo, bytes.NewReader(content), "archive")
	if err != nil {
		t.Fatal(err)
	}
	// Untampered, it reads back whole.
	rc, err := artifact.Download(h.ctx, registry.Access{}, ref, repo, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	_, _ = back.ReadFrom(rc)
	_ = rc.Close()
	if !bytes.Equal(back.Bytes(), content) {
		t.Fatalf("read back %d bytes, stored %d", back.Len(), len(content))
	}
	// Overwrite the layer's blob in the registry's storage.
	blobs, _ := filepath.Glob(filepath.Join(testBed.Registry.Dir, "docker/registry/v2/blobs/sha256/*/*/data"))
	tampered := 0
	for _, p := range blobs {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte("the real archive")) {
			continue
		}
		if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte("real"), []byte("evil")), 0o644); err != nil {
			t.Fatal(err)
		}
		tampered++
	}
	if tampered != 1 {
		t.Fatalf("tampered with %d blobs, want the one layer", tampered)
	}
	_, err = artifact.Download(h.ctx, registry.Access{}, ref, repo, t.TempDir(), 1<<20)
	if !errors.Is(err, artifact.ErrTampered) {
		t.Fatalf("download of the tampered artifact: %v, want ErrTampered", err)
	}
	// A reference outside the output's repository is refused too.
	other := strings.Replace(ref, h.repo(), h.repo()+"-other", 1)
	if _, err := artifact.Download(h.ctx, registry.Access{}, other, repo, t.TempDir(), 1<<20); err == nil ||
		!strings.Contains(err.Error(), "is not in the output's repository") {
		t.Errorf("artifact of another repository: %v", err)
	}
}

// TestBinaryBuildNeedsStrategy: as OpenShift's BuildByStrategy admission
// does for instantiatebinary, the user needs create on builds/<strategy>
// of the BuildConfig; build-controller, which creates the Build, has it
// anyway. Without it: 403 "build strategy Docker is not allowed" and
// nothing stored or created; granted in the namespace, the build starts.
// Not in parallel: it takes builds/docker from every user for a while.
func TestBinaryBuildNeedsStrategy(t *testing.T) {
	h := newHarness(t, "binary-strategy")
	h.buildConfig("app", false)
	alice := h.user("alice", "archway:build-starter")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	everyone := &rbacv1.ClusterRoleBinding{}
	if err := testBed.Client.Get(h.ctx, clientKey("", "archway:build-strategy-docker"), everyone); err != nil {
		t.Fatal(err)
	}
	if err := testBed.Client.Delete(h.ctx, everyone); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		everyone.ResourceVersion = ""
		_ = testBed.Client.Create(context.Background(), everyone)
	})
	h.waitAllowed("alice", "docker", false)

	_, err := h.plugin(alice, "start-build", "app", "--from-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "(403 Forbidden): build strategy Docker is not allowed") {
		t.Errorf("without builds/docker: %v", err)
	}
	if names, tags := h.builds(), h.tags(); len(names) != 0 || len(tags) != 0 {
		t.Fatalf("refused start left builds %v, tags %v", names, tags)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "docker"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "archway:build-strategy-docker"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: h.ns, Name: "alice"}}}
	if err := testBed.Client.Create(h.ctx, rb); err != nil {
		t.Fatal(err)
	}
	h.waitAllowed("alice", "docker", true)
	if _, err := h.plugin(alice, "start-build", "app", "--from-dir", dir); err != nil {
		t.Errorf("with builds/docker: %v", err)
	}
}

// TestIdenticalUploadsKeptApart: two uploads of the same bytes (two
// Builds started from the same directory) are two artifacts with two tags,
// so the first Build to end, which removes its input's tag, leaves the
// other's input tagged and readable.
func TestIdenticalUploadsKeptApart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "binary-twice")
	repo := testBed.Registry.Host + "/" + h.repo()
	output := repo + ":latest"
	content := bytes.Repeat([]byte("the same archive "), 1000)
	first, err := artifact.Store(h.ctx, registry.Access{}, repo, bytes.NewReader(content), "archive")
	if err != nil {
		t.Fatal(err)
	}
	second, err := artifact.Store(h.ctx, registry.Access{}, repo, bytes.NewReader(content), "archive")
	if err != nil {
		t.Fatal(err)
	}
	firstTag, secondTag := artifact.TagFor(first, output), artifact.TagFor(second, output)
	if first == second || firstTag == secondTag {
		t.Fatalf("two uploads of the same bytes share %s (tag %s): the first Build to end would remove the other's input", first, firstTag)
	}
	// The first Build ends: its tag goes, as its manifest-list pod removes it.
	if err := manifestlist.Untag(h.ctx, registry.Access{}, firstTag); err != nil {
		t.Fatal(err)
	}
	tags, err := testBed.Registry.Tags(h.ctx, h.repo())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tags, strings.TrimPrefix(firstTag, repo+":")) || !slices.Contains(tags, strings.TrimPrefix(secondTag, repo+":")) {
		t.Fatalf("tags after the first Build's cleanup: %v, want %s alone of the two", tags, secondTag)
	}
	rc, err := artifact.Download(h.ctx, registry.Access{}, second, repo, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatalf("the second Build's input after the first's cleanup: %v", err)
	}
	var back bytes.Buffer
	_, _ = back.ReadFrom(rc)
	_ = rc.Close()
	if !bytes.Equal(back.Bytes(), content) {
		t.Fatalf("read back %d bytes, stored %d", back.Len(), len(content))
	}
}
