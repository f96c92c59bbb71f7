package manifestlist_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

var builderBinary = sync.OnceValues(func() (string, error) {
	return bed.GoBuild(context.Background(), theBed.Dir, "./cmd/builder")
})

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// manifestListProcess is a running `builder manifest-list`.
type manifestListProcess struct {
	out            *syncBuffer
	done           chan struct{}
	err            error
	terminationLog string
}

// manifestListCommand is `builder manifest-list` for build as the
// manifest-list pod runs it: the Build as JSON in $BUILD.
func manifestListCommand(build *buildv1.Build, terminationLog string, extraArgs ...string) (*exec.Cmd, error) {
	bin, err := builderBinary()
	if err != nil {
		return nil, err
	}
	buildJSON, err := json.Marshal(build)
	if err != nil {
		return nil, err
	}
	// No --insecure: the bed's registries are on loopback, which
	// manifest-list reaches without TLS as docker-build does.
	args := append([]string{"manifest-list", "--wait-timeout=2m", "--termination-log=" + terminationLog}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), buildv1.BuildEnv+"="+string(buildJSON), "KUBECONFIG="+theBed.Kubeconfig)
	return cmd, nil
}

// runManifestListOnce runs `builder manifest-list` for build to its end.
func runManifestListOnce(build *buildv1.Build) ([]byte, error) {
	cmd, err := manifestListCommand(build, "")
	if err != nil {
		return nil, err
	}
	return cmd.CombinedOutput()
}

// startManifestList starts `builder manifest-list` for build.
func startManifestList(t *testing.T, build *buildv1.Build, env []string, extraArgs ...string) *manifestListProcess {
	t.Helper()
	p := &manifestListProcess{out: &syncBuffer{}, done: make(chan struct{}),
		terminationLog: filepath.Join(t.TempDir(), "termination-log")}
	if err := os.WriteFile(p.terminationLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, err := manifestListCommand(build, p.terminationLog, extraArgs...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		t.Logf("builder manifest-list output:\n%s", p.out)
	})
	return p
}

func (p *manifestListProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitExit waits for the process to end and returns its exit code.
func (p *manifestListProcess) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(bed.CaseTimeout):
		t.Fatalf("builder manifest-list did not finish:\n%s", p.out)
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	default:
		t.Fatal(p.err)
		return -1
	}
}

// waitOutput waits until the process has printed want.
func (p *manifestListProcess) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(bed.LongTimeout)
	for !strings.Contains(p.out.String(), want) {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("builder manifest-list never printed %q:\n%s", want, p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createBuild creates a Build of platforms that pushes to output.
func createBuild(t testing.TB, output string, platforms, allowedToFail []string, edits ...func(*buildv1.Build)) *buildv1.Build {
	t.Helper()
	ctx := context.Background()
	ns, err := theBed.CreateNamespace(ctx, "ml")
	if err != nil {
		t.Fatal(err)
	}
	b := &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-1"},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Strategy:               buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType},
			Output:                 buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: output}},
			Platforms:              platforms,
			PlatformsAllowedToFail: allowedToFail,
		}},
	}
	for _, edit := range edits {
		edit(b)
	}
	if err := theBed.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// platformStatus is one status.platforms entry, as a platform's builder
// applies it.
type platformStatus struct {
	platform string
	phase    buildv1.BuildPhase
	reason   buildv1.StatusReason
	message  string
	digest   digest.Digest
	output   string // the Build's output, for the per-platform tag
	// ref is the outputDockerImageReference recorded instead of the
	// per-platform tag (a forged entry).
	ref string
	// commit is the commit the platform reports having built.
	commit string
}

// apply writes the entry with server-side apply under a field manager of
// the platform's own, as each platform's pod does.
func (s platformStatus) apply(t testing.TB, b *buildv1.Build) {
	t.Helper()
	entry := map[string]any{"platform": s.platform, "phase": string(s.phase)}
	if s.reason != "" {
		entry["reason"] = string(s.reason)
		entry["message"] = s.message
	}
	if s.digest != "" {
		p, err := platform.Parse(s.platform)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]any{"imageDigest": s.digest.String(), "os": p.OS, "architecture": p.Architecture}
		if p.Variant != "" {
			out["variant"] = p.Variant
		}
		entry["output"] = out
		tag, err := platform.Tag(s.output, s.platform)
		if err != nil {
			t.Fatal(err)
		}
		entry["outputDockerImageReference"] = tag
	}
	if s.ref != "" {
		entry["outputDockerImageReference"] = s.ref
	}
	if s.commit != "" {
		entry["commit"] = s.commit
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"platforms": []any{entry}}}}
	u.SetAPIVersion(buildv1.GroupVersion.String())
	u.SetKind("Build")
	u.SetNamespace(b.Namespace)
	u.SetName(b.Name)
	p, _ := platform.Parse(s.platform)
	if err := theBed.Client.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("test-docker-build-"+p.NameSuffix()), client.ForceOwnership); err != nil {
		t.Fatalf("applying the status of %s: %v", s.platform, err)
	}
}

func getBuild(t *testing.T, b *buildv1.Build) *buildv1.Build {
	t.Helper()
	var got buildv1.Build
	if err := theBed.Client.Get(context.Background(), client.ObjectKeyFromObject(b), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// waitingCommand is `builder manifest-list` waiting for the four platforms
// of a Build, whose images are pushed but not yet reported Complete.
type waitingCommand struct {
	repo, output string
	build        *buildv1.Build
	proc         *manifestListProcess
	digests      map[string]digest.Digest
}

// startWaiting creates a Build of the four platforms, all Running, starts
// `builder manifest-list` for it, and pushes the platforms' images once it
// says it waits for them.
func startWaiting(t *testing.T) *waitingCommand {
	t.Helper()
	reg := theBed.Registry
	w := &waitingCommand{repo: repoName(t)}
	w.output = reg.Host + "/" + w.repo + ":v1"
	w.build = createBuild(t, w.output, fourPlatforms, nil)
	for _, p := range fourPlatforms {
		platformStatus{platform: p, phase: buildv1.BuildPhaseRunning}.apply(t, w.build)
	}
	w.proc = startManifestList(t, w.build, nil)
	w.proc.waitOutput(t, "Waiting for linux/amd64 (Running)")
	w.digests = pushPlatforms(t, reg, w.output, fourPlatforms, pushOptions{})
	return w
}

// complete reports platforms Complete, with the images pushed for them.
func (w *waitingCommand) complete(t *testing.T, platforms ...string) {
	t.Helper()
	for _, p := range platforms {
		platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: w.digests[p], output: w.output}.apply(t, w.build)
	}
}

// checkPushed checks that the command ended well having pushed the index
// of the four platforms, recorded its digest in the Build and untagged
// the platforms' tags; it returns the index and its digest.
func (w *waitingCommand) checkPushed(t *testing.T) (ocispec.Index, digest.Digest) {
	t.Helper()
	if code := w.proc.waitExit(t); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	index, _, indexDigest := readIndex(t, theBed.Registry, w.output)
	if got := indexPlatforms(index); !slices.Equal(got, wantPlatforms) {
		t.Errorf("index platforms %v, want %v", got, wantPlatforms)
	}
	if got := getBuild(t, w.build); got.Status.Output.To == nil || got.Status.Output.To.ImageDigest != indexDigest.String() {
		t.Errorf("status.output.to = %+v, want imageDigest %s", got.Status.Output.To, indexDigest)
	}
	if got := tagsOf(t, theBed.Registry, w.repo); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("tags %v, want only v1", got)
	}
	return index, indexDigest
}

// TestCommandWaitsThenPushes starts `builder manifest-list` while the
// platforms are still running: it waits, and once the last one completes it
// pushes the index, records its digest in the Build and untags.
func TestCommandWaitsThenPushes(t *testing.T) {
	w := startWaiting(t)
	w.complete(t, fourPlatforms[:3]...)
	w.proc.waitOutput(t, "Waiting for linux/s390x (Running)")
	if w.proc.exited() {
		t.Fatalf("builder manifest-list ended while linux/s390x was running:\n%s", w.proc.out)
	}
	w.complete(t, "linux/s390x")

	_, indexDigest := w.checkPushed(t)
	got := getBuild(t, w.build)
	if got.Status.OutputDockerImageReference != w.output {
		t.Errorf("status.outputDockerImageReference = %q, want %q", got.Status.OutputDockerImageReference, w.output)
	}
	if len(got.Status.Platforms) != 4 {
		t.Errorf("status.platforms has %d entries after the manifest-list apply, want 4", len(got.Status.Platforms))
	}
	pullAll(t, theBed.Registry, theBed.Registry.Host+"/"+w.repo+"@"+indexDigest.String())
}

// TestCommandReadsAhead: `builder manifest-list` reads each platform's
// image (manifest and config, by the digest the platform recorded) as soon
// as the platform reports Complete, while it waits for the others: once
// the last one reports, the registry is asked only for that platform's
// image and the index push (and the untagging).
func TestCommandReadsAhead(t *testing.T) {
	reg := theBed.Registry
	w := startWaiting(t)
	reads := map[string][]string{} // each platform's manifest and config paths
	for _, p := range fourPlatforms {
		raw, mediaType, err := getManifest(context.Background(), reg, reg.Host+"/"+w.repo+"@"+w.digests[p].String())
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.FromBlob(raw, mediaType)
		if err != nil {
			t.Fatal(err)
		}
		reads[p] = []string{"/v2/" + w.repo + "/manifests/" + w.digests[p].String(), "/v2/" + w.repo + "/blobs/" + m.ConfigInfo().Digest.String()}
	}
	start, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	w.complete(t, fourPlatforms[:3]...)
	// The registry's own log says when the three images have been read.
	var beforeLast []bed.RegistryRequest
	deadline := time.Now().Add(bed.LongTimeout)
	for {
		all, err := reg.Requests()
		if err != nil {
			t.Fatal(err)
		}
		beforeLast = all[len(start):]
		if !slices.ContainsFunc(fourPlatforms[:3], func(p string) bool { return countGets(beforeLast, reads[p]...) < 2 }) {
			break
		}
		if w.proc.exited() || time.Now().After(deadline) {
			t.Fatalf("the images of %v were not read while linux/s390x was running; registry requests since they completed: %v\n%s",
				fourPlatforms[:3], beforeLast, w.proc.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.complete(t, "linux/s390x")
	if code := w.proc.waitExit(t); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	all, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	afterLast := all[len(start)+len(beforeLast):]
	for _, p := range fourPlatforms[:3] {
		if n := countGets(afterLast, reads[p]...); n != 0 {
			t.Errorf("%s's image was read %d more times after the last platform reported", p, n)
		}
	}
	if n := countGets(afterLast, reads["linux/s390x"]...); n != 2 {
		t.Errorf("linux/s390x's manifest and config were read %d times after it reported, want 2", n)
	}
	t.Logf("registry requests after the last platform reported: %d (%v)", len(afterLast), afterLast)
	index, _ := w.checkPushed(t)
	for _, d := range index.Manifests {
		if !slices.Contains(slices.Collect(maps.Values(w.digests)), d.Digest) {
			t.Errorf("the index lists %s, which no platform reported", d.Digest)
		}
	}
}

// countGets counts the GETs of paths among reqs.
func countGets(reqs []bed.RegistryRequest, paths ...string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == "GET" && slices.Contains(paths, r.Path) {
			n++
		}
	}
	return n
}

// TestCommandOutcomes runs `builder manifest-list` after the platforms have
// finished, for each way they can have finished.
func TestCommandOutcomes(t *testing.T) {
	tests := []struct {
		name          string
		allowedToFail []string
		// finish says how each platform ended; all four were pushed.
		finish      func(p string, d digest.Digest, output string) platformStatus
		wantExit    int
		wantReason  buildv1.StatusReason
		wantMessage string
		wantIndexOf []string
		// git gives the Build a Git source, whose platforms report commits.
		git bool
	}{
		{
			name:          "allowed to fail",
			allowedToFail: []string{"linux/s390x"},
			finish:        failS390x,
			wantIndexOf:   wantPlatforms[:3],
		},
		{
			name:        "required platform failed",
			finish:      failS390x,
			wantExit:    1,
			wantReason:  buildv1.StatusReasonPlatformBuildFailed,
			wantMessage: "linux/s390x Failed (DockerBuildFailed: RUN false: exit status 1)",
		},
		{
			name: "complete without a digest",
			finish: func(p string, d digest.Digest, output string) platformStatus {
				s := platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: d, output: output}
				if p == "linux/arm64" {
					s.digest = "" // an older builder wrote the build's own status instead
				}
				return s
			},
			wantExit:    1,
			wantReason:  buildv1.StatusReasonPlatformVersionSkew,
			wantMessage: "platform linux/arm64 is Complete but recorded no image digest",
		},
		{
			// A push to the branch between two platforms' clones.
			name: "platforms built from different commits",
			git:  true,
			finish: func(p string, d digest.Digest, output string) platformStatus {
				s := platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: d, output: output, commit: firstCommit}
				if p == "linux/ppc64le" {
					s.commit = secondCommit
				}
				return s
			},
			wantExit:    1,
			wantReason:  buildv1.StatusReasonManifestListFailed,
			wantMessage: "linux/ppc64le: " + secondCommit,
		},
		{
			name: "every platform built the same commit",
			git:  true,
			finish: func(p string, d digest.Digest, output string) platformStatus {
				return platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: d, output: output, commit: firstCommit}
			},
			wantIndexOf: wantPlatforms,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := theBed.Registry
			repo := repoName(t)
			output := reg.Host + "/" + repo + ":v1"
			var edits []func(*buildv1.Build)
			if tt.git {
				edits = append(edits, func(b *buildv1.Build) {
					b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git"}}
				})
			}
			build := createBuild(t, output, fourPlatforms, tt.allowedToFail, edits...)
			digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})
			for _, p := range fourPlatforms {
				tt.finish(p, digests[p], output).apply(t, build)
			}
			proc := startManifestList(t, build, nil)
			if code := proc.waitExit(t); code != tt.wantExit {
				t.Fatalf("exit code %d, want %d", code, tt.wantExit)
			}
			got := getBuild(t, build)
			tags := tagsOf(t, reg, repo)
			if tt.wantExit == 0 {
				index, _, indexDigest := readIndex(t, reg, output)
				if got := indexPlatforms(index); !slices.Equal(got, tt.wantIndexOf) {
					t.Errorf("index platforms %v, want %v", got, tt.wantIndexOf)
				}
				if got.Status.Output.To == nil || got.Status.Output.To.ImageDigest != indexDigest.String() {
					t.Errorf("status.output.to = %+v, want %s", got.Status.Output.To, indexDigest)
				}
				if !slices.Equal(tags, []string{"v1"}) {
					t.Errorf("tags %v, want only v1", tags)
				}
				return
			}
			if got.Status.Reason != tt.wantReason || !strings.Contains(got.Status.Message, tt.wantMessage) {
				t.Errorf("status reason %q message %q; want %s and %q", got.Status.Reason, got.Status.Message, tt.wantReason, tt.wantMessage)
			}
			if got.Status.Output.To != nil && got.Status.Output.To.ImageDigest != "" {
				t.Errorf("status.output.to = %+v, want no digest", got.Status.Output.To)
			}
			if len(tags) != 0 {
				t.Errorf("tags %v, want none: no list, and every per-platform tag removed", tags)
			}
			msg, err := os.ReadFile(proc.terminationLog)
			if err != nil || !strings.HasPrefix(string(msg), string(tt.wantReason)+": ") {
				t.Errorf("termination message %q (%v), want it to start with %s", msg, err, tt.wantReason)
			}
		})
	}
}

// Two commits of one branch, as a push between two platforms' clones
// leaves them.
const (
	firstCommit  = "0123456789abcdef0123456789abcdef01234567"
	secondCommit = "89abcdef0123456789abcdef0123456789abcdef"
)

func failS390x(p string, d digest.Digest, output string) platformStatus {
	if p == "linux/s390x" {
		return platformStatus{platform: p, phase: buildv1.BuildPhaseFailed,
			reason: buildv1.StatusReasonDockerBuildFailed, message: "RUN false: exit status 1"}
	}
	return platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: d, output: output}
}

// TestCommandWaitTimeout: platforms that never finish make the wait end at
// --wait-timeout with a failure, and the per-platform tags are removed
// anyway.
func TestCommandWaitTimeout(t *testing.T) {
	reg := theBed.Registry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	build := createBuild(t, output, fourPlatforms, nil)
	digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})
	for _, p := range fourPlatforms[:3] {
		platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: digests[p], output: output}.apply(t, build)
	}
	platformStatus{platform: "linux/s390x", phase: buildv1.BuildPhaseRunning}.apply(t, build)
	proc := startManifestList(t, build, nil, "--wait-timeout=2s")
	if code := proc.waitExit(t); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	got := getBuild(t, build)
	if got.Status.Reason != buildv1.StatusReasonManifestListFailed || !strings.Contains(got.Status.Message, "linux/s390x (Running)") {
		t.Errorf("status reason %q message %q; want ManifestListFailed naming linux/s390x", got.Status.Reason, got.Status.Message)
	}
	if tags := tagsOf(t, reg, repo); len(tags) != 0 {
		t.Errorf("tags %v, want none", tags)
	}
}

// TestCommandPushSecret uses the push secret mounted at
// $PUSH_DOCKERCFG_PATH against the htpasswd registry: with the right
// credentials the list is pushed and the tags removed; with wrong ones the
// build fails saying so, and the tags stay (untagging failed too, which is
// only logged).
func TestCommandPushSecret(t *testing.T) {
	reg := theBed.AuthRegistry
	for _, tt := range []struct {
		name     string
		password string
		wantExit int
	}{
		{name: "right credentials", password: reg.Password},
		{name: "wrong credentials", password: "wrong", wantExit: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := repoName(t)
			output := reg.Host + "/" + repo + ":v1"
			build := createBuild(t, output, fourPlatforms, nil)
			digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})
			for _, p := range fourPlatforms {
				platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: digests[p], output: output}.apply(t, build)
			}
			secretDir := t.TempDir() // as a kubernetes.io/dockerconfigjson Secret is mounted
			data, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{
				"auth": base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + tt.password))}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(secretDir, ".dockerconfigjson"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			proc := startManifestList(t, build, []string{buildv1.PushDockerConfigPathEnv + "=" + secretDir})
			if code := proc.waitExit(t); code != tt.wantExit {
				t.Fatalf("exit code %d, want %d", code, tt.wantExit)
			}
			got := getBuild(t, build)
			tags := tagsOf(t, reg, repo)
			if tt.wantExit == 0 {
				if got.Status.Output.To == nil || got.Status.Output.To.ImageDigest == "" || !slices.Equal(tags, []string{"v1"}) {
					t.Errorf("status.output.to %+v, tags %v; want a digest and only v1", got.Status.Output.To, tags)
				}
				return
			}
			if got.Status.Reason != buildv1.StatusReasonManifestListFailed || !strings.Contains(got.Status.Message, "authentication required") ||
				!strings.Contains(got.Status.Message, ".dockerconfigjson") {
				t.Errorf("status reason %q message %q; want ManifestListFailed saying authentication failed with .dockerconfigjson",
					got.Status.Reason, got.Status.Message)
			}
			if len(tags) != 4 {
				t.Errorf("tags %v; want the 4 per-platform tags, which wrong credentials cannot remove", tags)
			}
		})
	}
}

// TestCommandBuildEnded: for a Build that already ended without a manifest
// list (the controller starts the pod then with --remove-tags, once every
// platform pod has ended), the command only removes the per-platform tags: no index, the
// status untouched, exit 0; and exit 1 when the tags cannot be removed.
func TestCommandBuildEnded(t *testing.T) {
	for _, tt := range []struct {
		name     string
		phase    buildv1.BuildPhase
		reg      *bed.Registry
		password string
		wantExit int
	}{
		{name: "failed", phase: buildv1.BuildPhaseFailed, reg: theBed.Registry},
		{name: "cancelled", phase: buildv1.BuildPhaseCancelled, reg: theBed.Registry},
		{name: "failed with tags it cannot remove", phase: buildv1.BuildPhaseFailed, reg: theBed.AuthRegistry, password: "wrong", wantExit: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := repoName(t)
			output := tt.reg.Host + "/" + repo + ":v1"
			build := createBuild(t, output, fourPlatforms, nil)
			digests := pushPlatforms(t, tt.reg, output, fourPlatforms[:2], pushOptions{})
			for _, p := range fourPlatforms[:2] {
				platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: digests[p], output: output}.apply(t, build)
			}
			for _, p := range fourPlatforms[2:] {
				platformStatus{platform: p, phase: buildv1.BuildPhaseCancelled, reason: buildv1.StatusReasonCancelledBuild, message: "cancelled"}.apply(t, build)
			}
			patch := []byte(`{"status":{"phase":"` + string(tt.phase) + `","reason":"PlatformBuildFailed","message":"ended"}}`)
			if err := theBed.Client.Status().Patch(context.Background(), build, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			var env []string
			if tt.reg.Username != "" {
				secretDir := t.TempDir()
				data, err := json.Marshal(map[string]any{"auths": map[string]any{tt.reg.Host: map[string]string{
					"auth": base64.StdEncoding.EncodeToString([]byte(tt.reg.Username + ":" + tt.password))}}})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(secretDir, ".dockerconfigjson"), data, 0o600); err != nil {
					t.Fatal(err)
				}
				env = append(env, buildv1.PushDockerConfigPathEnv+"="+secretDir)
			}
			proc := startManifestList(t, build, env, "--remove-tags")
			if code := proc.waitExit(t); code != tt.wantExit {
				t.Fatalf("exit code %d, want %d:\n%s", code, tt.wantExit, proc.out)
			}
			got := getBuild(t, build)
			if got.Status.Phase != tt.phase || got.Status.Message != "ended" || got.Status.Output.To != nil {
				t.Errorf("status changed: phase %s message %q output %+v", got.Status.Phase, got.Status.Message, got.Status.Output.To)
			}
			wantCond, wantReason := "True", buildv1.ReasonPlatformTagsRemoved
			if tt.wantExit != 0 {
				wantCond, wantReason = "False", buildv1.ReasonRemovingPlatformTagsFailed
			}
			var cond *buildv1.BuildCondition
			for i := range got.Status.Conditions {
				if got.Status.Conditions[i].Type == buildv1.BuildConditionPlatformTagsRemoved {
					cond = &got.Status.Conditions[i]
				}
			}
			if cond == nil || string(cond.Status) != wantCond || cond.Reason != wantReason {
				t.Errorf("condition %s = %+v, want %s %s", buildv1.BuildConditionPlatformTagsRemoved, cond, wantCond, wantReason)
			}
			tags := tagsOf(t, tt.reg, repo)
			if tt.wantExit == 0 && len(tags) != 0 {
				t.Errorf("tags %v, want none", tags)
			}
			if tt.wantExit != 0 && len(tags) != 2 {
				t.Errorf("tags %v, want the 2 pushed, which wrong credentials cannot remove", tags)
			}
		})
	}
}

// TestCommandKeepsTagsStatusNames: a status entry naming another tag of
// the output's repository (a forged entry: anyone who may write the
// Build's status can write one) does not make the command remove that tag,
// whether it pushes the manifest list or only removes the per-platform tags
// of an ended Build: :prod survives, every per-platform tag is gone.
func TestCommandKeepsTagsStatusNames(t *testing.T) {
	for _, phase := range []buildv1.BuildPhase{buildv1.BuildPhaseRunning, buildv1.BuildPhaseFailed} {
		t.Run(string(phase), func(t *testing.T) {
			reg := theBed.Registry
			repo := repoName(t)
			output := reg.Host + "/" + repo + ":v1"
			prod := reg.Host + "/" + repo + ":prod"
			build := createBuild(t, output, fourPlatforms, nil)
			digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})
			pushPlatforms(t, reg, output, fourPlatforms[:1], pushOptions{to: prod})
			for _, p := range fourPlatforms {
				s := platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: digests[p], output: output}
				if p == "linux/arm64" {
					s.ref = prod
				}
				s.apply(t, build)
			}
			if phase != buildv1.BuildPhaseRunning {
				patch := []byte(`{"status":{"phase":"` + string(phase) + `","reason":"GenericBuildFailed","message":"ended"}}`)
				if err := theBed.Client.Status().Patch(context.Background(), build, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			if phase != buildv1.BuildPhaseRunning {
				args = append(args, "--remove-tags") // as build-controller starts it for an ended Build
			}
			proc := startManifestList(t, build, nil, args...)
			if code := proc.waitExit(t); code != 0 {
				t.Fatalf("exit code %d, want 0:\n%s", code, proc.out)
			}
			want := []string{"prod"}
			if phase == buildv1.BuildPhaseRunning {
				want = []string{"prod", "v1"}
			}
			if tags := tagsOf(t, reg, repo); !slices.Equal(tags, want) {
				t.Errorf("tags %v, want %v: :prod kept, every per-platform tag removed", tags, want)
			}
		})
	}
}

// TestCommandLeavesAnEndedBuild: without --remove-tags (the pod made with
// the platform pods), the command removes nothing from a Build that ended
// without a manifest list: a platform pod being stopped may still push, so
// build-controller starts the one that removes the tags once every
// platform pod has ended. Exit 0, tags and status untouched.
func TestCommandLeavesAnEndedBuild(t *testing.T) {
	reg := theBed.Registry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	build := createBuild(t, output, fourPlatforms, nil)
	digests := pushPlatforms(t, reg, output, fourPlatforms[:2], pushOptions{})
	for _, p := range fourPlatforms[:2] {
		platformStatus{platform: p, phase: buildv1.BuildPhaseComplete, digest: digests[p], output: output}.apply(t, build)
	}
	proc := startManifestList(t, build, nil)
	patch := []byte(`{"status":{"phase":"Failed","reason":"PlatformBuildFailed","message":"ended"}}`)
	if err := theBed.Client.Status().Patch(context.Background(), build, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if code := proc.waitExit(t); code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, proc.out)
	}
	if tags := tagsOf(t, reg, repo); len(tags) != 2 {
		t.Errorf("tags %v, want the 2 pushed: removed only once every platform pod has ended", tags)
	}
	got := getBuild(t, build)
	if got.Status.Reason != buildv1.StatusReasonPlatformBuildFailed || got.Status.Message != "ended" || len(got.Status.Conditions) != 0 {
		t.Errorf("status changed: reason %s message %q conditions %+v", got.Status.Reason, got.Status.Message, got.Status.Conditions)
	}
}
