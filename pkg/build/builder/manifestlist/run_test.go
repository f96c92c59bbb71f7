package manifestlist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/registry"
)

const output = "registry.example.com/team/app:v1"

var (
	key  = types.NamespacedName{Namespace: "team", Name: "app-1"}
	four = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
)

// builds is the Builds of a test: Get returns the Build as it was first,
// the list and watch start from it, and send delivers later versions.
type builds struct {
	mu      sync.Mutex
	first   *buildv1.Build
	watcher *watch.FakeWatcher
	watched chan struct{}
	applied []map[string]any
}

func newBuilds(b *buildv1.Build) *builds {
	return &builds{first: b, watcher: watch.NewFakeWithChanSize(10, false), watched: make(chan struct{})}
}

func (f *builds) Get(context.Context, types.NamespacedName) (*buildv1.Build, error) {
	return f.first.DeepCopy(), nil
}

func (f *builds) ListWatch(types.NamespacedName) cache.ListerWatcher {
	var once sync.Once
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": buildv1.GroupVersion.String(), "kind": "BuildList"}}
			list.SetResourceVersion("1")
			list.Items = []unstructured.Unstructured{*toUnstructured(f.first)}
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			once.Do(func() { close(f.watched) })
			return f.watcher, nil
		},
	}}
}

// noWatchList says the test's list and watch have no streaming list
// (initial events ended by a bookmark), as an apiserver has: the informer
// lists, then watches.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// send delivers a later version of the Build once the watch has started.
func (f *builds) send(t *testing.T, typ watch.EventType, b *buildv1.Build) {
	t.Helper()
	<-f.watched
	f.watcher.Action(typ, toUnstructured(b))
}

func (f *builds) ApplyStatus(_ context.Context, _ types.NamespacedName, manager string, status map[string]any) error {
	if manager != FieldManager {
		return fmt.Errorf("applied as %s", manager)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, status)
	return nil
}

func (f *builds) lastApplied() map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applied) == 0 {
		return nil
	}
	return f.applied[len(f.applied)-1]
}

func toUnstructured(b *buildv1.Build) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(buildv1.GroupVersion.String())
	u.SetKind("Build")
	return u
}

// fakeRegistry records what the flow asks of the registry.
type fakeRegistry struct {
	mu        sync.Mutex
	assembled []manifestlist.Options
	untagged  [][]string
	untagErr  error
	// read are the entries read ahead, in order; each is also sent to
	// reads, when it is not nil.
	read  []manifestlist.Entry
	reads chan manifestlist.Entry
	// hang makes the reads of these digests last until their context
	// ends; each such read's entry is then sent to cancelled.
	hang      map[digest.Digest]bool
	cancelled chan manifestlist.Entry
	// fromReadAhead are the entries Assemble found read ahead.
	fromReadAhead []manifestlist.Entry
}

func (r *fakeRegistry) ReadChild(ctx context.Context, _ string, _ registry.Access, e manifestlist.Entry) (manifestlist.Child, error) {
	r.mu.Lock()
	r.read = append(r.read, e)
	r.mu.Unlock()
	if r.reads != nil {
		r.reads <- e
	}
	if r.hang[e.Digest] {
		<-ctx.Done()
		r.cancelled <- e
		return manifestlist.Child{}, ctx.Err()
	}
	// The config's os.version marks what was read, which the entry of
	// the child Assemble is given does not overwrite.
	return manifestlist.Child{Entry: e, MediaType: ocispec.MediaTypeImageManifest, Size: 1,
		Config: ocispec.Platform{OSVersion: readMark(e.Digest)}}, nil
}

func readMark(d digest.Digest) string { return "read " + d.String() }

func (r *fakeRegistry) Assemble(ctx context.Context, opts manifestlist.Options) (*manifestlist.Result, error) {
	var ahead []manifestlist.Entry
	for _, e := range opts.Entries {
		if c, ok := opts.ReadAhead.Child(ctx, opts.Output, e); ok && c.Digest == e.Digest && c.Config.OSVersion == readMark(e.Digest) {
			ahead = append(ahead, e)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assembled = append(r.assembled, opts)
	r.fromReadAhead = append(r.fromReadAhead, ahead...)
	d := digest.FromString("index")
	return &manifestlist.Result{Digest: d, Reference: "registry.example.com/team/app@" + d.String()}, nil
}

func (r *fakeRegistry) Untag(_ context.Context, _ registry.Access, refs ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.untagged = append(r.untagged, refs)
	return r.untagErr
}

func (r *fakeRegistry) readEntries() []manifestlist.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.read)
}

// build is a four-platform Build with each platform's entry in phase.
func build(phase buildv1.BuildPhase, entries map[string]buildv1.BuildPhase) *buildv1.Build {
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, ResourceVersion: "1"}}
	b.Spec.Platforms = four
	b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: output}
	b.Status.Phase = phase
	for _, p := range four {
		e := buildv1.BuildStatusPlatform{Platform: p, Phase: entries[p]}
		if e.Phase == buildv1.BuildPhaseComplete {
			parts := strings.Split(p, "/")
			e.Output = &buildv1.BuildStatusPlatformOutput{ImageDigest: digest.FromString(p).String(), OS: parts[0], Architecture: parts[1]}
		}
		if e.Phase == buildv1.BuildPhaseFailed {
			e.Reason, e.Message = buildv1.StatusReasonDockerBuildFailed, "exit status 1"
		}
		b.Status.Platforms = append(b.Status.Platforms, e)
	}
	return b
}

var (
	commitA = strings.Repeat("a", 40)
	commitB = strings.Repeat("b", 40)
)

// gitBuild makes b a Build of a Git source whose spec.revision is commit
// ("" for none), with each given platform's entry reporting the commit
// that follows it.
func gitBuild(b *buildv1.Build, commit string, platformCommits ...string) *buildv1.Build {
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git"}}
	if commit != "" {
		b.Spec.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: commit}}
	}
	for i := 0; i+1 < len(platformCommits); i += 2 {
		for j := range b.Status.Platforms {
			if b.Status.Platforms[j].Platform == platformCommits[i] {
				b.Status.Platforms[j].Commit = platformCommits[i+1]
			}
		}
	}
	return b
}

func allIn(phase buildv1.BuildPhase) map[string]buildv1.BuildPhase {
	m := map[string]buildv1.BuildPhase{}
	for _, p := range four {
		m[p] = phase
	}
	return m
}

func perPlatformTags() []string {
	var tags []string
	for _, p := range four {
		tags = append(tags, output+"-"+strings.ReplaceAll(p, "/", "-"))
	}
	return tags
}

func newRun(b *builds, r *fakeRegistry) (*Run, *strings.Builder) {
	out := &strings.Builder{}
	return &Run{Builds: b, Registry: r, Key: key, Out: out, WaitTimeout: time.Minute}, out
}

func TestWaitsThenPushes(t *testing.T) {
	b, reg := newBuilds(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))), &fakeRegistry{}
	run, out := newRun(b, reg)
	done := make(chan error, 1)
	go func() { done <- run.Do(context.Background()) }()
	b.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)))
	if err := <-done; err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if len(reg.assembled) != 1 || reg.assembled[0].Output != output || len(reg.assembled[0].Entries) != 4 {
		t.Errorf("assembled %+v, want one list of four platforms at %s", reg.assembled, output)
	}
	if len(reg.untagged) != 1 || !slices.Equal(reg.untagged[0], perPlatformTags()) {
		t.Errorf("untagged %v, want %v", reg.untagged, perPlatformTags())
	}
	st := b.lastApplied()
	if st["outputDockerImageReference"] != output || st["output"] == nil {
		t.Errorf("recorded %v, want the output and its digest", st)
	}
	if !strings.Contains(out.String(), "Waiting for linux/amd64 (Running)") {
		t.Errorf("log does not say what it waited for:\n%s", out)
	}
}

func TestEndedBuildOnlyUntags(t *testing.T) {
	for _, tt := range []struct {
		name     string
		untagErr error
		wantErr  bool
		wantCond string
	}{
		{name: "tags removed", wantCond: "True"},
		{name: "tags cannot be removed", untagErr: errors.New("DELETE: 401 Unauthorized"), wantErr: true, wantCond: "False"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ended := build(buildv1.BuildPhaseFailed, map[string]buildv1.BuildPhase{"linux/amd64": buildv1.BuildPhaseComplete,
				"linux/arm64": buildv1.BuildPhaseCancelled, "linux/ppc64le": buildv1.BuildPhaseCancelled, "linux/s390x": buildv1.BuildPhaseFailed})
			b, reg := newBuilds(ended), &fakeRegistry{untagErr: tt.untagErr}
			run, out := newRun(b, reg)
			run.RemoveTagsOnly = true
			err := run.Do(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Do: %v, want error %v\n%s", err, tt.wantErr, out)
			}
			if len(reg.assembled) != 0 {
				t.Errorf("a manifest list was pushed for an ended build: %+v", reg.assembled)
			}
			if len(reg.untagged) != 1 || !slices.Equal(reg.untagged[0], perPlatformTags()) {
				t.Errorf("untagged %v, want %v", reg.untagged, perPlatformTags())
			}
			conds, _ := b.lastApplied()["conditions"].([]any)
			if len(conds) != 1 || conds[0].(map[string]any)["status"] != tt.wantCond {
				t.Errorf("applied %v, want the PlatformTagsRemoved condition %s", b.lastApplied(), tt.wantCond)
			}
		})
	}
}

func TestFailsWithoutPushing(t *testing.T) {
	tests := []struct {
		name       string
		first      *buildv1.Build
		then       *buildv1.Build
		event      watch.EventType
		timeout    time.Duration
		wantReason buildv1.StatusReason
		wantMsg    string
	}{
		{
			name:       "a required platform failed",
			first:      build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)),
			then:       build(buildv1.BuildPhaseRunning, map[string]buildv1.BuildPhase{"linux/amd64": "Complete", "linux/arm64": "Complete", "linux/ppc64le": "Complete", "linux/s390x": "Failed"}),
			event:      watch.Modified,
			wantReason: buildv1.StatusReasonPlatformBuildFailed,
			wantMsg:    "linux/s390x",
		},
		{
			name:  "the platforms were built from different commits",
			first: gitBuild(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), ""),
			then: gitBuild(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)), commitA,
				"linux/amd64", commitA, "linux/arm64", commitA, "linux/ppc64le", commitB, "linux/s390x", commitA),
			event:      watch.Modified,
			wantReason: buildv1.StatusReasonManifestListFailed,
			wantMsg:    "linux/ppc64le: " + commitB,
		},
		{
			name:       "the build was deleted",
			first:      build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)),
			then:       build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)),
			event:      watch.Deleted,
			wantReason: buildv1.StatusReasonManifestListFailed,
			wantMsg:    "deleted",
		},
		{
			name:       "the platforms do not finish in time",
			first:      build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)),
			timeout:    100 * time.Millisecond,
			wantReason: buildv1.StatusReasonManifestListFailed,
			wantMsg:    "linux/s390x (Running)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, reg := newBuilds(tt.first), &fakeRegistry{}
			run, out := newRun(b, reg)
			if tt.timeout > 0 {
				run.WaitTimeout = tt.timeout
			}
			done := make(chan error, 1)
			go func() { done <- run.Do(context.Background()) }()
			if tt.then != nil {
				b.send(t, tt.event, tt.then)
			}
			err := <-done
			if err == nil || !strings.Contains(err.Error(), string(tt.wantReason)) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Do: %v, want %s saying %q\n%s", err, tt.wantReason, tt.wantMsg, out)
			}
			if len(reg.assembled) != 0 {
				t.Errorf("a manifest list was pushed: %+v", reg.assembled)
			}
			if len(reg.untagged) != 1 {
				t.Errorf("untagged %v, want the per-platform tags removed once", reg.untagged)
			}

		})
	}
}

// TestUntagsOnlySpecTags: a status entry is written by build pods (and by
// anyone who may patch builds/status), so a forged one naming the
// repository's :prod, or a platform the Build does not target, must not
// make the manifest-list pod remove that tag: the tags removed are
// computed from spec.output.to and the platforms of the spec alone.
func TestUntagsOnlySpecTags(t *testing.T) {
	forge := func(b *buildv1.Build) *buildv1.Build {
		b.Status.Platforms[1].OutputDockerImageReference = "registry.example.com/team/app:prod"
		b.Status.Platforms = append(b.Status.Platforms, buildv1.BuildStatusPlatform{Platform: "linux/riscv64",
			Phase: buildv1.BuildPhaseFailed, OutputDockerImageReference: "registry.example.com/team/app:stable"})
		return b
	}
	for _, tt := range []struct {
		name      string
		build     *buildv1.Build
		platforms []string // Run.Platforms, from $BUILD
		want      []string
	}{
		{name: "ended build, spec.platforms", build: forge(build(buildv1.BuildPhaseFailed, allIn(buildv1.BuildPhaseFailed))), want: perPlatformTags()},
		{name: "complete build, spec.platforms", build: forge(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete))), want: perPlatformTags()},
		{name: "platforms resolved by the controller, none in the Build's spec", build: func() *buildv1.Build {
			b := forge(build(buildv1.BuildPhaseFailed, allIn(buildv1.BuildPhaseFailed)))
			b.Spec.Platforms = nil
			return b
		}(), platforms: four, want: perPlatformTags()},
		{name: "binary input: its artifact's tag too", build: func() *buildv1.Build {
			b := forge(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)))
			b.Spec.Source.Binary = &buildv1.BinaryBuildSource{Artifact: "registry.example.com/team/app@sha256:" + strings.Repeat("ab", 32)}
			return b
		}(), want: append(perPlatformTags(), "registry.example.com/team/app:sha256-"+strings.Repeat("ab", 32)+".binary")},
		{name: "binary input of another repository: not untagged", build: func() *buildv1.Build {
			b := forge(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)))
			b.Spec.Source.Binary = &buildv1.BinaryBuildSource{Artifact: "registry.example.com/team/other@sha256:" + strings.Repeat("ab", 32)}
			return b
		}(), want: perPlatformTags()},
		{name: "no platforms anywhere in the spec: nothing removed", build: func() *buildv1.Build {
			b := forge(build(buildv1.BuildPhaseFailed, allIn(buildv1.BuildPhaseFailed)))
			b.Spec.Platforms = nil
			return b
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, reg := newBuilds(tt.build), &fakeRegistry{}
			run, out := newRun(b, reg)
			run.Platforms = tt.platforms
			run.RemoveTagsOnly = tt.build.Status.Phase == buildv1.BuildPhaseFailed
			_ = run.Do(context.Background())
			var untagged []string
			for _, refs := range reg.untagged {
				untagged = append(untagged, refs...)
			}
			if !slices.Equal(untagged, tt.want) {
				t.Errorf("untagged %v, want %v\n%s", untagged, tt.want, out)
			}
		})
	}
}

// TestLeavesAnEndedBuild: the pod starts with the platform pods, so a Build
// that ends without a manifest list while it waits (a required platform
// failed, or it was cancelled) may still have platform pods being stopped,
// which may push after any removal: the pod exits touching nothing, and
// the run started with RemoveTagsOnly once they have all ended removes the
// tags. A pod stopped while it waits (deleted) writes nothing either.
func TestLeavesAnEndedBuild(t *testing.T) {
	cancelled := build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))
	cancelled.Status.Cancelled = true
	failed := build(buildv1.BuildPhaseFailed, map[string]buildv1.BuildPhase{"linux/amd64": "Complete",
		"linux/arm64": "Cancelled", "linux/ppc64le": "Cancelled", "linux/s390x": "Failed"})
	for _, tt := range []struct {
		name    string
		first   *buildv1.Build
		then    *buildv1.Build
		stop    bool
		wantErr string
		wantLog string
	}{
		{name: "cancelled while it waits", first: build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), then: cancelled,
			wantLog: "The build was cancelled: no manifest list to push"},
		{name: "failed while it waits", first: build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), then: failed,
			wantLog: "The build ended (Failed): no manifest list to push"},
		{name: "already failed when it starts", first: failed, wantLog: "The build ended (Failed): no manifest list to push"},
		{name: "stopped while it waits", first: build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), stop: true,
			wantErr: "stopped", wantLog: "Stopped before the platforms finished"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, reg := newBuilds(tt.first), &fakeRegistry{}
			run, out := newRun(b, reg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.stop {
				// SIGTERM: the pod is being deleted.
				cancel()
			}
			done := make(chan error, 1)
			go func() { done <- run.Do(ctx) }()
			if tt.then != nil {
				b.send(t, watch.Modified, tt.then)
			}
			err := <-done
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Do: %v, want error %q\n%s", err, tt.wantErr, out)
			}
			if len(reg.assembled) != 0 || len(reg.untagged) != 0 {
				t.Errorf("assembled %v, untagged %v: want nothing done\n%s", reg.assembled, reg.untagged, out)
			}
			if len(b.applied) != 0 {
				t.Errorf("applied %v to the Build, want nothing", b.applied)
			}
			if !strings.Contains(out.String(), tt.wantLog) {
				t.Errorf("log does not say %q:\n%s", tt.wantLog, out)
			}
		})
	}
}

// TestRemoveTagsOnlyNeedsAnEndedBuild: the run started to remove the tags
// removes nothing from a Build that has not ended.
func TestRemoveTagsOnlyNeedsAnEndedBuild(t *testing.T) {
	b, reg := newBuilds(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete))), &fakeRegistry{}
	run, out := newRun(b, reg)
	run.RemoveTagsOnly = true
	err := run.Do(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has not ended without a manifest list") {
		t.Fatalf("Do: %v, want an error saying the Build has not ended\n%s", err, out)
	}
	if len(reg.assembled) != 0 || len(reg.untagged) != 0 {
		t.Errorf("assembled %v, untagged %v: want nothing done", reg.assembled, reg.untagged)
	}
}

// withDigest is b with platform's entry Complete with image digest d.
func withDigest(b *buildv1.Build, platform string, d digest.Digest) *buildv1.Build {
	for i, p := range b.Status.Platforms {
		if p.Platform == platform {
			parts := strings.Split(platform, "/")
			b.Status.Platforms[i].Phase = buildv1.BuildPhaseComplete
			b.Status.Platforms[i].Output = &buildv1.BuildStatusPlatformOutput{ImageDigest: d.String(), OS: parts[0], Architecture: parts[1]}
		}
	}
	return b
}

// nextRead returns the next entry read ahead, failing when Do ends first.
func nextRead(t *testing.T, reg *fakeRegistry, done <-chan error) manifestlist.Entry {
	t.Helper()
	select {
	case e := <-reg.reads:
		return e
	case err := <-done:
		t.Fatalf("Do ended (%v) before the read", err)
	case <-time.After(time.Minute):
		t.Fatalf("no read ahead; read %v", reg.readEntries())
	}
	return manifestlist.Entry{}
}

// hangingRead is a run under way whose linux/amd64 entry says Complete
// with an image whose read hangs until it is stopped.
type hangingRead struct {
	builds *builds
	reg    *fakeRegistry
	out    *strings.Builder
	done   chan error // Do's result
	image  digest.Digest
}

// startHangingRead starts a run under ctx, has linux/amd64 report image,
// and returns once the read of image, which hangs until it is stopped, is
// under way.
func startHangingRead(ctx context.Context, t *testing.T, image digest.Digest) hangingRead {
	t.Helper()
	r := hangingRead{
		builds: newBuilds(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))),
		reg:    &fakeRegistry{reads: make(chan manifestlist.Entry, 16), hang: map[digest.Digest]bool{image: true}, cancelled: make(chan manifestlist.Entry, 16)},
		done:   make(chan error, 1),
		image:  image,
	}
	var run *Run
	run, r.out = newRun(r.builds, r.reg)
	go func() { r.done <- run.Do(ctx) }()
	r.builds.send(t, watch.Modified, withDigest(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), "linux/amd64", image))
	if e := nextRead(t, r.reg, r.done); e.Digest != image {
		t.Fatalf("read %s, want %s", e.Digest, image)
	}
	return r
}

// waitStopped waits for the hanging read to be stopped, failing when it
// is not; after says what should have stopped it.
func (r hangingRead) waitStopped(t *testing.T, after string) {
	t.Helper()
	select {
	case e := <-r.reg.cancelled:
		if e.Digest != r.image {
			t.Errorf("stopped the read of %s, want %s", e.Digest, r.image)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the read of %s was not stopped when %s", r.image, after)
	}
}

// TestReadsEachPlatformAsItCompletes: each platform's image is read as
// soon as its entry says Complete, by the digest it recorded, while the
// run waits for the others; the push then finds every image read.
func TestReadsEachPlatformAsItCompletes(t *testing.T) {
	b, reg := newBuilds(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))), &fakeRegistry{reads: make(chan manifestlist.Entry, 16)}
	run, out := newRun(b, reg)
	done := make(chan error, 1)
	go func() { done <- run.Do(context.Background()) }()
	three := allIn(buildv1.BuildPhaseComplete)
	three["linux/s390x"] = buildv1.BuildPhaseRunning
	b.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, three))
	read := map[string]digest.Digest{}
	for len(read) < 3 {
		e := nextRead(t, reg, done)
		read[e.Platform] = e.Digest
	}
	for _, p := range four[:3] {
		if read[p] != digest.FromString(p) {
			t.Errorf("read %s as %s before linux/s390x ended, want its recorded digest %s", p, read[p], digest.FromString(p))
		}
	}
	b.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)))
	if err := <-done; err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if got := reg.readEntries(); len(got) != 4 {
		t.Errorf("read %v, want each of the four platforms once", got)
	}
	if len(reg.fromReadAhead) != 4 {
		t.Errorf("the push found %v read ahead, want all four platforms", reg.fromReadAhead)
	}
	if !strings.Contains(out.String(), "Read the image of linux/amd64 ("+digest.FromString("linux/amd64").String()+")") {
		t.Errorf("log does not say linux/amd64 was read:\n%s", out)
	}
}

// TestReadAheadFollowsARetriedPlatform: a platform that reports another
// image after its first (its build was retried) has the read of the first
// stopped, and the push lists the image it reported last, read by that
// digest.
func TestReadAheadFollowsARetriedPlatform(t *testing.T) {
	first, second := digest.FromString("first amd64 image"), digest.FromString("second amd64 image")
	r := startHangingRead(context.Background(), t, first)
	r.builds.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))) // retried
	r.builds.send(t, watch.Modified, withDigest(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), "linux/amd64", second))
	r.waitStopped(t, "the platform reported another")
	r.builds.send(t, watch.Modified, withDigest(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)), "linux/amd64", second))
	if err := <-r.done; err != nil {
		t.Fatalf("Do: %v\n%s", err, r.out)
	}
	var listed digest.Digest
	for _, e := range r.reg.assembled[0].Entries {
		if e.Platform == "linux/amd64" {
			listed = e.Digest
		}
	}
	if listed != second {
		t.Errorf("listed linux/amd64 as %s, want the image it reported last, %s", listed, second)
	}
	if !slices.ContainsFunc(r.reg.fromReadAhead, func(e manifestlist.Entry) bool { return e.Platform == "linux/amd64" && e.Digest == second }) {
		t.Errorf("the push found %v read ahead, want linux/amd64 read as %s", r.reg.fromReadAhead, second)
	}
}

// TestReadAheadStopsWhenNoLongerComplete: a platform whose entry said
// Complete and then no longer does (its build retried, or failed after
// all) has its read stopped at once, before it reports again.
func TestReadAheadStopsWhenNoLongerComplete(t *testing.T) {
	first, second := digest.FromString("first amd64 image"), digest.FromString("second amd64 image")
	r := startHangingRead(context.Background(), t, first)
	r.builds.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))) // retried
	r.waitStopped(t, "the platform's entry no longer said Complete")
	r.builds.send(t, watch.Modified, withDigest(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)), "linux/amd64", second))
	if err := <-r.done; err != nil {
		t.Fatalf("Do: %v\n%s", err, r.out)
	}
}

// TestReadAheadStopsWithTheRun: reads under way stop when the Build
// ends without a manifest list, is deleted, or the pod is stopped; Do
// returns only once they have.
func TestReadAheadStopsWithTheRun(t *testing.T) {
	failed := build(buildv1.BuildPhaseFailed, map[string]buildv1.BuildPhase{"linux/amd64": "Complete",
		"linux/arm64": "Cancelled", "linux/ppc64le": "Cancelled", "linux/s390x": "Failed"})
	for _, tt := range []struct {
		name    string
		then    *buildv1.Build
		event   watch.EventType
		stop    bool
		wantErr string
	}{
		{name: "a required platform failed", then: failed, event: watch.Modified},
		{name: "deleted", then: build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning)), event: watch.Deleted, wantErr: "deleted"},
		{name: "stopped", stop: true, wantErr: "stopped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := startHangingRead(ctx, t, digest.FromString("linux/amd64"))
			if tt.stop {
				cancel()
			} else {
				r.builds.send(t, tt.event, tt.then)
			}
			err := <-r.done
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Do: %v, want error %q\n%s", err, tt.wantErr, r.out)
			}
			select {
			case <-r.reg.cancelled:
			default:
				t.Errorf("Do returned with the read of linux/amd64 still under way")
			}
			if len(r.reg.assembled) != 0 {
				t.Errorf("a manifest list was pushed: %+v", r.reg.assembled)
			}
		})
	}
}

// TestReadAheadOnlyWhatTheSpecLists: only the platforms of the spec that
// recorded a digest are read ahead: a status entry for another platform
// (anyone who may write the Build's status can add one) or one Complete
// without a digest is not.
func TestReadAheadOnlyWhatTheSpecLists(t *testing.T) {
	b, reg := newBuilds(build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))), &fakeRegistry{reads: make(chan manifestlist.Entry, 16)}
	run, out := newRun(b, reg)
	done := make(chan error, 1)
	go func() { done <- run.Do(context.Background()) }()
	forged := build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseRunning))
	forged.Status.Platforms = append(forged.Status.Platforms, buildv1.BuildStatusPlatform{Platform: "linux/riscv64", Phase: buildv1.BuildPhaseComplete,
		Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: digest.FromString("riscv64").String()}})
	forged.Status.Platforms[1].Phase = buildv1.BuildPhaseComplete // linux/arm64, without a digest
	withDigest(forged, "linux/amd64", digest.FromString("linux/amd64"))
	b.send(t, watch.Modified, forged)
	if e := nextRead(t, reg, done); e.Platform != "linux/amd64" {
		t.Errorf("read %s first, want linux/amd64", e.Platform)
	}
	b.send(t, watch.Modified, build(buildv1.BuildPhaseRunning, allIn(buildv1.BuildPhaseComplete)))
	if err := <-done; err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	var platforms []string
	for _, e := range reg.readEntries() {
		platforms = append(platforms, e.Platform)
		if e.Platform == "linux/arm64" && e.Digest != digest.FromString("linux/arm64") {
			t.Errorf("read linux/arm64 as %q, want it read once it recorded its digest", e.Digest)
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, four) {
		t.Errorf("read %v, want each platform of the spec once", platforms)
	}
}
