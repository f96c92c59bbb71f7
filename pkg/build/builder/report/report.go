// Package report writes what a build pod did into its Build's status with
// server-side apply, each writer under a field manager of its own, so that
// the controller, the platforms' pods and the manifest-list pod never
// overwrite each other's fields.
//
// A platform's pod (a Build with one target platform) owns its entry of
// status.platforms and nothing else: Running when it starts, then Complete
// with the pushed image's digest and the platform read back from the
// image's config, or Failed with a reason and message. A classic pod (no
// target platform) writes what OpenShift's builder writes: the pushed
// image's reference and digest, the stages, and on failure the reason and
// message; the controller sets the phase from the pod.
package report

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/platform"
)

// ClassicFieldManager is the field manager of a classic (single-pod)
// build's builder.
const ClassicFieldManager = "archway-builder"

// maxLogSnippet bounds the log snippet a failure records, as OpenShift's
// builder bounds its termination message.
const maxLogSnippet = 2000

// FieldManager returns the field manager of the builder of platform p,
// e.g. "archway-builder-linux-arm64": one per platform, so that the
// platforms' pods own their entries side by side.
func FieldManager(p string) string {
	if parsed, err := platform.Parse(p); err == nil {
		return ClassicFieldManager + "-" + parsed.NameSuffix()
	}
	return ClassicFieldManager + "-" + p
}

// Result is what a successful build pushed.
type Result struct {
	// OutputReference is the pull spec pushed to (the Build's
	// spec.output.to.name); empty when the build had no output.
	OutputReference string
	// Image is the pushed image as read back from the registry; nil when
	// nothing was pushed.
	Image *image.Image
	// Stages are the build's stages with their timings.
	Stages []buildv1.StageInfo
	// Commit is the Git commit built; "" when the source is not Git.
	Commit string
}

// Failure is why a build failed.
type Failure struct {
	// Reason is the status reason, e.g. DockerBuildFailed.
	Reason buildv1.StatusReason
	// Message says what happened, for people.
	Message string
	// LogSnippet is the end of the build's log.
	LogSnippet string
	// Stages are the stages that ran, with their timings.
	Stages []buildv1.StageInfo
	// Commit is the Git commit checked out before the failure; "" when
	// none was.
	Commit string
}

// Reporter records a build pod's progress in its Build.
type Reporter interface {
	// Running records that the build started.
	Running(ctx context.Context) error
	// Complete records a successful build.
	Complete(ctx context.Context, r Result) error
	// Failed records a failed build.
	Failed(ctx context.Context, f Failure) error
}

// StatusApplier server-side applies fields of a Build's status as a field
// manager, forcing ownership; *Client is one.
type StatusApplier interface {
	ApplyStatus(ctx context.Context, build types.NamespacedName, manager string, status map[string]any) error
}

// BuildGetter reads a Build; *Client is one.
type BuildGetter interface {
	Get(ctx context.Context, key types.NamespacedName) (*buildv1.Build, error)
}

// recordTimeout bounds how long a pod waits for build-controller to record
// its UID in the Build: the controller records it in the status write that
// follows the pod's creation, so the wait is normally a few milliseconds.
const recordTimeout = 5 * time.Minute

// AwaitRecorded waits until recorded says the Build records the pod (its
// UID in status.platforms[].podUID or status.podUID): the
// archway-build-status-writers policy lets a pod write only once its UID
// is there, so that a pod that merely has the name cannot.
func AwaitRecorded(ctx context.Context, g BuildGetter, build types.NamespacedName, recorded func(*buildv1.Build) bool) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, recordTimeout, true, func(ctx context.Context) (bool, error) {
		b, err := g.Get(ctx, build)
		if err != nil {
			last = err
			return false, nil
		}
		return recorded(b), nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting for build-controller to record this pod in Build %s: %w (last error: %w)", build, err, last)
		}
		return fmt.Errorf("waiting for build-controller to record this pod in Build %s: %w", build, err)
	}
	return nil
}

// Discard is a Reporter that records nothing, for builds outside a cluster.
type Discard struct{}

// Running does nothing.
func (Discard) Running(context.Context) error { return nil }

// Complete does nothing.
func (Discard) Complete(context.Context, Result) error { return nil }

// Failed does nothing.
func (Discard) Failed(context.Context, Failure) error { return nil }

// PlatformReporter writes one platform's entry of a Build's
// status.platforms.
type PlatformReporter struct {
	client   StatusApplier
	build    types.NamespacedName
	platform string
	podName  string
	now      func() time.Time
	started  *metav1.Time
	// await, when set, runs once before the first write.
	await func(context.Context) error
}

// NewPlatformReporter returns a Reporter for the entry of platform (spelled
// as the Build's spec.platforms spells it) written by pod podName. The
// entry's start time is now, when the pod's builder starts, whether or not
// Running is reported before the outcome.
func NewPlatformReporter(c StatusApplier, build types.NamespacedName, platform, podName string) *PlatformReporter {
	r := &PlatformReporter{client: c, build: build, platform: platform, podName: podName, now: time.Now}
	t := metav1.NewTime(r.now().Truncate(time.Second))
	r.started = &t
	return r
}

// AwaitPodUID makes the reporter wait, before its first write, until the
// Build's entry for its platform records uid as its pod's UID.
func (r *PlatformReporter) AwaitPodUID(g BuildGetter, uid string) {
	r.await = func(ctx context.Context) error {
		return AwaitRecorded(ctx, g, r.build, PodUIDRecorded(r.platform, uid))
	}
}

// PodUIDRecorded says whether a Build records uid as the UID of the pod of
// platform (its status.platforms entry), or for platform "" as that of its
// manifest-list or classic pod (status.podUID).
func PodUIDRecorded(platform, uid string) func(*buildv1.Build) bool {
	if platform == "" {
		return func(b *buildv1.Build) bool { return b.Status.PodUID == uid }
	}
	return func(b *buildv1.Build) bool {
		for _, e := range b.Status.Platforms {
			if e.Platform == platform {
				return e.PodUID == uid
			}
		}
		return false
	}
}

// Running records phase Running, the pod and the start time.
func (r *PlatformReporter) Running(ctx context.Context) error {
	return r.apply(ctx, r.entry(buildv1.BuildPhaseRunning))
}

// Complete records phase Complete with the pushed image.
func (r *PlatformReporter) Complete(ctx context.Context, res Result) error {
	e := r.entry(buildv1.BuildPhaseComplete)
	e.CompletionTimestamp = r.completion()
	e.OutputDockerImageReference = res.OutputReference
	e.Commit = res.Commit
	if res.Image != nil {
		e.Output = PlatformOutput(*res.Image)
	}
	return r.apply(ctx, e)
}

// Failed records phase Failed with the reason, message and log snippet.
func (r *PlatformReporter) Failed(ctx context.Context, f Failure) error {
	e := r.entry(buildv1.BuildPhaseFailed)
	e.CompletionTimestamp = r.completion()
	e.Reason = f.Reason
	e.Message = f.Message
	e.LogSnippet = truncateLog(f.LogSnippet)
	e.Commit = f.Commit
	return r.apply(ctx, e)
}

// entry is the entry with what every apply repeats: server-side apply
// removes the fields a manager stops sending.
func (r *PlatformReporter) entry(phase buildv1.BuildPhase) buildv1.BuildStatusPlatform {
	return buildv1.BuildStatusPlatform{
		Platform:       r.platform,
		Phase:          phase,
		PodName:        r.podName,
		StartTimestamp: r.started,
	}
}

func (r *PlatformReporter) completion() *metav1.Time {
	t := metav1.NewTime(r.now().Truncate(time.Second))
	return &t
}

func (r *PlatformReporter) apply(ctx context.Context, e buildv1.BuildStatusPlatform) error {
	if r.await != nil {
		if err := r.await(ctx); err != nil {
			return err
		}
		r.await = nil
	}
	return applyStatus(ctx, r.client, r.build, FieldManager(r.platform), PlatformStatus(e))
}

// PlatformStatus returns the status to apply for one platform's entry: a
// status.platforms list holding only that entry. Server-side apply makes a
// writer the owner of exactly the fields it sends, so the entry's fields
// are named one by one here (set when not empty), rather than left to the
// API types' omitempty tags.
//
// The builder writes these maps rather than the generated apply
// configurations (pkg/apis/build/v1/applyconfiguration), which the
// controller uses: linking those, and through them client-go's core/v1
// apply configurations, grows the builder binary from 56.5 to 78.7 MB
// (measured with Go 1.26), and every RUN step of a build re-executes that
// binary, copying it into memory.
func PlatformStatus(e buildv1.BuildStatusPlatform) map[string]any {
	entry := fields{"platform": e.Platform}
	entry.str("phase", string(e.Phase))
	entry.str("reason", string(e.Reason))
	entry.str("message", e.Message)
	entry.str("podName", e.PodName)
	entry.str("emulatedOn", e.EmulatedOn)
	entry.time("startTimestamp", e.StartTimestamp)
	entry.time("completionTimestamp", e.CompletionTimestamp)
	entry.str("outputDockerImageReference", e.OutputDockerImageReference)
	entry.str("logSnippet", e.LogSnippet)
	entry.str("commit", e.Commit)
	if o := e.Output; o != nil {
		out := fields{}
		out.str("imageDigest", o.ImageDigest)
		out.str("mediaType", o.MediaType)
		if o.Size != 0 {
			out["size"] = o.Size
		}
		out.str("os", o.OS)
		out.str("architecture", o.Architecture)
		out.str("variant", o.Variant)
		out.str("os.version", o.OSVersion)
		if len(o.OSFeatures) > 0 {
			out["os.features"] = stringsToAny(o.OSFeatures)
		}
		entry["output"] = map[string]any(out)
	}
	return map[string]any{"platforms": []any{map[string]any(entry)}}
}

// fields is an object to apply, built field by field.
type fields map[string]any

func (f fields) str(key, v string) {
	if v != "" {
		f[key] = v
	}
}

func (f fields) time(key string, t *metav1.Time) {
	if t != nil {
		f[key] = t.UTC().Format(time.RFC3339)
	}
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// BuildReporter writes a classic build's output and failure into the
// Build's own status.
type BuildReporter struct {
	client StatusApplier
	build  types.NamespacedName
	// await, when set, runs before the write.
	await func(context.Context) error
}

// AwaitPodUID makes the reporter wait, before it writes, until the Build's
// status.podUID is uid.
func (r *BuildReporter) AwaitPodUID(g BuildGetter, uid string) {
	r.await = func(ctx context.Context) error {
		return AwaitRecorded(ctx, g, r.build, PodUIDRecorded("", uid))
	}
}

func (r *BuildReporter) apply(ctx context.Context, status map[string]any) error {
	if r.await != nil {
		if err := r.await(ctx); err != nil {
			return err
		}
	}
	return applyStatus(ctx, r.client, r.build, ClassicFieldManager, status)
}

// NewBuildReporter returns a Reporter for a classic (single-pod) build.
func NewBuildReporter(c StatusApplier, build types.NamespacedName) *BuildReporter {
	return &BuildReporter{client: c, build: build}
}

// Running records nothing: the controller sets a classic build's phase
// from its pod.
func (r *BuildReporter) Running(context.Context) error { return nil }

// Complete records the pushed image's reference and digest and the
// stages.
func (r *BuildReporter) Complete(ctx context.Context, res Result) error {
	return r.apply(ctx, ClassicCompleteStatus(res))
}

// Failed records the reason, message, log snippet and stages.
func (r *BuildReporter) Failed(ctx context.Context, f Failure) error {
	return r.apply(ctx, ClassicFailedStatus(f))
}

// ClassicCompleteStatus returns the status a classic build applies when it
// succeeds: what OpenShift's builder records (never the phase, which the
// controller sets from the pod).
func ClassicCompleteStatus(res Result) map[string]any {
	st := fields{}
	if res.Image != nil {
		st.str("outputDockerImageReference", res.OutputReference)
		st["output"] = map[string]any{"to": map[string]any{"imageDigest": res.Image.Digest}}
	}
	st.stages(res.Stages)
	return st
}

// ClassicFailedStatus returns the status a classic build applies when it
// fails.
func ClassicFailedStatus(f Failure) map[string]any {
	st := fields{}
	st.str("reason", string(f.Reason))
	st.str("message", f.Message)
	st.str("logSnippet", truncateLog(f.LogSnippet))
	st.stages(f.Stages)
	return st
}

// stages sets the stages: an atomic list, owned whole by its writer.
func (f fields) stages(stages []buildv1.StageInfo) {
	if len(stages) == 0 {
		return
	}
	list := make([]any, 0, len(stages))
	for _, st := range stages {
		stage := fields{}
		stage.str("name", string(st.Name))
		stage.time("startTime", &st.StartTime)
		stage["durationMilliseconds"] = st.DurationMilliseconds
		var steps []any
		for _, step := range st.Steps {
			s := fields{}
			s.str("name", string(step.Name))
			s.time("startTime", &step.StartTime)
			s["durationMilliseconds"] = step.DurationMilliseconds
			steps = append(steps, map[string]any(s))
		}
		if len(steps) > 0 {
			stage["steps"] = steps
		}
		list = append(list, map[string]any(stage))
	}
	f["stages"] = list
}

// truncateLog keeps the end of a log, where a failure shows.
func truncateLog(s string) string {
	if len(s) <= maxLogSnippet {
		return s
	}
	return s[len(s)-maxLogSnippet:]
}

// applyStatus applies status to the Build as manager, and retries what may
// pass: conflicts, throttling, timeouts and dropped connections.
func applyStatus(ctx context.Context, c StatusApplier, build types.NamespacedName, manager string, status map[string]any) error {
	backoff := wait.Backoff{Steps: 6, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2}
	err := retry.OnError(backoff, retriable, func() error {
		return c.ApplyStatus(ctx, build, manager, status)
	})
	if err != nil {
		return fmt.Errorf("writing the status of Build %s as %s: %w", build, manager, err)
	}
	return nil
}

func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err)
}
