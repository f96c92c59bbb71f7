// Package manifestlist is what the last pod of a multi-platform Build
// does (`builder manifest-list`): it waits until every entry of the Build's
// status.platforms has finished, checks the platforms' images, pushes the
// manifest list (OCI index) to spec.output.to, records its digest and
// removes the per-platform tags. Each platform's image is read as soon as
// its entry says Complete, while the others still build, so that once the
// last one ends only its image is left to read before the push. The
// controller starts it with the platform pods, so it waits for the length
// of the build. When the Build
// ends without a manifest list meanwhile (a required platform failed, it
// was cancelled) it exits touching nothing: platform pods being stopped may
// still push. The controller then starts it again with RemoveTagsOnly,
// once every platform pod has ended, and that run removes the tags.
//
// The flow talks to the apiserver and the registry through two small
// interfaces (Builds, Registry), so that its decisions are tested without
// either; the command in cmd/builder only wires flags to a Run.
package manifestlist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/build/trigger/binary/artifact"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// FieldManager is the field manager of everything the manifest-list pod
// writes to a Build's status, so that its fields never collide with the
// controller's or the platform pods'.
const FieldManager = "archway-builder-manifest-list"

// untagTimeout bounds the untagging at the end, which runs even when the
// wait for the platforms ran out of time.
const untagTimeout = 2 * time.Minute

// Builds reads, follows and writes the one Build; *report.Client is one.
type Builds interface {
	Get(ctx context.Context, key types.NamespacedName) (*buildv1.Build, error)
	// ListWatch lists and watches the Build alone.
	ListWatch(key types.NamespacedName) cache.ListerWatcher
	ApplyStatus(ctx context.Context, key types.NamespacedName, manager string, status map[string]any) error
}

// Registry reads platforms' images, pushes manifest lists and removes tags.
type Registry interface {
	// ReadChild reads one platform's image from the repository of output
	// (manifestlist.ReadChild).
	ReadChild(ctx context.Context, output string, access registry.Access, e manifestlist.Entry) (manifestlist.Child, error)
	Assemble(ctx context.Context, opts manifestlist.Options) (*manifestlist.Result, error)
	Untag(ctx context.Context, access registry.Access, refs ...string) error
}

// Registries is the Registry of package manifestlist.
type Registries struct{}

// ReadChild reads one platform's image (manifestlist.ReadChild).
func (Registries) ReadChild(ctx context.Context, output string, access registry.Access, e manifestlist.Entry) (manifestlist.Child, error) {
	return manifestlist.ReadChild(ctx, output, access, e)
}

// Assemble pushes a manifest list (manifestlist.Assemble).
func (Registries) Assemble(ctx context.Context, opts manifestlist.Options) (*manifestlist.Result, error) {
	return manifestlist.Assemble(ctx, opts)
}

// Untag removes tags (manifestlist.Untag).
func (Registries) Untag(ctx context.Context, access registry.Access, refs ...string) error {
	return manifestlist.Untag(ctx, access, refs...)
}

// Run is one run of the manifest-list pod.
type Run struct {
	// Builds reads, watches and writes the Build.
	Builds Builds
	// Registry pushes the index and removes tags.
	Registry Registry
	// Key names the Build.
	Key types.NamespacedName
	// Access holds the registry credentials and TLS policy.
	Access registry.Access
	// Out receives the log.
	Out io.Writer
	// TerminationLog is the file the failure reason goes to, if it exists
	// (the pod's termination message).
	TerminationLog string
	// WaitTimeout bounds the wait for the platforms (and
	// spec.completionDeadlineSeconds bounds it further).
	WaitTimeout time.Duration
	// Platforms are the platforms the controller resolved for the Build
	// (spec.platforms of the Build in the pod's $BUILD); the per-platform
	// tags removed are theirs. Empty: the Build's own spec.platforms.
	Platforms []string
	// RemoveTagsOnly is the run the controller starts once every platform
	// pod of a Build that ended without a manifest list has ended: it only
	// removes the per-platform tags. Without it, such a Build is left as
	// it is.
	RemoveTagsOnly bool
	// PodUID is the pod's own UID: before writing the Build's status the
	// run waits until build-controller has recorded it in status.podUID
	// (the status-writers policy admits only that pod). Empty: no wait.
	PodUID string

	// outMu serializes the log: platforms' images are read, and logged,
	// while the run waits.
	outMu sync.Mutex
}

func (r *Run) logf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.Out, format+"\n", args...)
}

// Do waits for the Build's platforms, then pushes the manifest list, or
// fails saying why; the per-platform tags are removed either way. For a
// Build that already ended without a manifest list it only removes them.
func (r *Run) Do(ctx context.Context) error {
	ahead := &readAhead{run: r, ctx: ctx}
	defer ahead.close()
	build, waitErr := r.wait(ctx, ahead.start)
	start := time.Now()
	if ctx.Err() != nil {
		// Stopped (the pod is being deleted): whoever stopped it decides;
		// nothing is written and nothing removed.
		r.logf("Stopped before the platforms finished: %v", context.Cause(ctx))
		return fmt.Errorf("stopped: %w", context.Cause(ctx))
	}
	if build == nil {
		return r.fail(ctx, nil, buildv1.StatusReasonManifestListFailed, waitErr)
	}
	ended := build.Status.Phase.IsTerminal() && build.Status.Phase != buildv1.BuildPhaseComplete
	if r.RemoveTagsOnly && (waitErr != nil || !ended) {
		return r.fail(ctx, nil, buildv1.StatusReasonManifestListFailed,
			fmt.Errorf("%s: the Build %s has not ended without a manifest list (phase %s)", "--remove-tags", r.Key, describePhase(build)))
	}
	if waitErr == nil && !r.RemoveTagsOnly && (ended || build.Status.Cancelled) {
		// Started with the platform pods: a pod being stopped may still
		// push, so the tags are removed by the run the controller starts
		// once every platform pod has ended.
		how := "ended (" + describePhase(build) + ")"
		if !ended {
			how = "was cancelled"
		}
		r.logf("The build %s: no manifest list to push. "+
			"build-controller removes the per-platform tags once every platform pod has ended.", how)
		return nil
	}
	output := ""
	if build.Spec.Output.To != nil {
		output = build.Spec.Output.To.Name
	}
	if output == "" {
		r.logf("The build has no output (spec.output.to): there is no manifest list to push.")
		return nil
	}
	if kind := build.Spec.Output.To.Kind; kind != "" && kind != "DockerImage" {
		return r.fail(ctx, build, buildv1.StatusReasonInvalidOutputReference,
			fmt.Errorf("output kind %s is not supported: use DockerImage", kind))
	}
	tags := r.platformTags(build, output)
	if r.RemoveTagsOnly {
		// The controller starts this run for a Build that ended without a
		// manifest list once every platform pod has ended: removing the
		// tags is all there is to do, and nothing can tag again after it.
		r.logf("The build ended (%s) without a manifest list: removing the per-platform tags.", describePhase(build))
		untagErr := r.untag(ctx, tags)
		cond := map[string]any{"type": string(buildv1.BuildConditionPlatformTagsRemoved), "status": "True",
			"reason": buildv1.ReasonPlatformTagsRemoved, "message": "Removed " + strings.Join(tags, ", ") + "."}
		if untagErr != nil {
			cond["status"], cond["reason"] = "False", buildv1.ReasonRemovingPlatformTagsFailed
			cond["message"] = "Removing the per-platform tags failed: " + untagErr.Error()
		}
		now := time.Now().UTC().Format(time.RFC3339)
		cond["lastUpdateTime"], cond["lastTransitionTime"] = now, now
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.applyStatus(wctx, map[string]any{"conditions": []any{cond}}); err != nil {
			r.logf("Warning: recording the removal in Build %s: %v", r.Key, err)
		}
		if untagErr != nil {
			return r.fail(ctx, nil, buildv1.StatusReasonManifestListFailed, fmt.Errorf("removing the per-platform tags: %w", untagErr))
		}
		return nil
	}
	// Untag at the end whatever happens: after a push, a failure, or running
	// out of time.
	defer func() {
		ahead.close() // reads still under way are of no use now
		if err := r.untag(ctx, tags); err != nil {
			// A courtesy to the registry here: never a reason to fail.
			r.logf("Warning: removing per-platform tags: %v", err)
		}
	}()

	if waitErr != nil {
		return r.fail(ctx, build, buildv1.StatusReasonManifestListFailed, waitErr)
	}
	sel, err := manifestlist.Select(build.Status.Platforms, build.Spec.PlatformsAllowedToFail)
	if err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	for _, p := range sel.Skipped {
		r.logf("Leaving out %s, which is allowed to fail: %s %s %s", p.Platform, p.Phase, p.Reason, p.Message)
	}
	if err := manifestlist.SameCommit(sel.Included, source.Type(build.Spec.Source) == buildv1.BuildSourceGit, recordedCommit(build)); err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	entries, err := manifestlist.Entries(sel.Included)
	if err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	r.logf("Pushing the manifest list of %d platforms to %s", len(entries), output)
	res, err := r.Registry.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries, Access: r.Access, ReadAhead: ahead.reads})
	// What Assemble did not take is of no use, and a read still under
	// way would log beside the result.
	ahead.close()
	if err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	if err := r.recordOutput(ctx, output, res); err != nil {
		return r.fail(ctx, build, buildv1.StatusReasonManifestListFailed,
			fmt.Errorf("the manifest list %s was pushed, but recording it in the Build failed: %w", res.Reference, err))
	}
	r.printResult(res, time.Since(start))
	return nil
}

// wait returns the Build once every platform has finished (or the Build
// itself has). It reads the Build, then follows it with client-go's
// UntilWithSync (a list and watch of the one Build, listed again when a
// watch cannot resume), so no change is missed. On error it also returns
// the last Build it saw, if any, so the per-platform tags can still be
// removed. seen is given every version of the Build it reads.
func (r *Run) wait(ctx context.Context, seen func(*buildv1.Build)) (*buildv1.Build, error) {
	build, err := r.Builds.Get(ctx, r.Key)
	if err != nil {
		return nil, fmt.Errorf("reading Build %s: %w", r.Key, err)
	}
	timeout := r.WaitTimeout
	if d := build.Spec.CompletionDeadlineSeconds; d != nil && *d > 0 {
		deadline := time.Duration(*d) * time.Second
		if build.Status.StartTimestamp != nil {
			deadline -= time.Since(build.Status.StartTimestamp.Time)
		}
		timeout = min(timeout, max(deadline, time.Minute))
	}
	lastWaiting := ""
	done := func(b *buildv1.Build) bool {
		build = b
		seen(b)
		if finished(b) {
			return true
		}
		if w := waitingFor(b); w != lastWaiting {
			r.logf("Waiting for %s", w)
			lastWaiting = w
		}
		return false
	}
	if done(build) {
		return build, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = watchtools.UntilWithSync(ctx, r.Builds.ListWatch(r.Key), &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return false, fmt.Errorf("the Build %s was deleted while waiting for its platforms", r.Key)
		case watch.Added, watch.Modified:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				return false, nil
			}
			b, err := report.BuildFromUnstructured(u)
			if err != nil {
				return false, err
			}
			return done(b), nil
		}
		return false, nil
	})
	switch {
	case err == nil:
		return build, nil
	case errors.Is(err, watchtools.ErrWatchClosed), ctx.Err() != nil:
		return build, fmt.Errorf("platforms still not finished after %s: %s", timeout.Round(time.Second), waitingFor(build))
	}
	return build, err
}

// readAhead reads each platform's image as soon as the platform's status
// entry says Complete with a digest, while the run waits for the others
// (manifestlist.ReadAhead): Assemble then reads only what is left.
type readAhead struct {
	run *Run
	ctx context.Context
	// reads is made at the first platform to read; nil until then.
	reads *manifestlist.ReadAhead
}

// start starts reading the image of every platform of b that is Complete
// and has recorded a digest, unless that read has started already. Only
// the platforms of the spec (Run.Platforms, else spec.platforms) are read
// ahead, so their number bounds the reads under way; nothing is read for
// a Build that ended, is being cancelled or has no output to push to.
func (a *readAhead) start(b *buildv1.Build) {
	to := b.Spec.Output.To
	if a.run.RemoveTagsOnly || b.Status.Phase.IsTerminal() || b.Status.Cancelled ||
		to == nil || to.Name == "" || (to.Kind != "" && to.Kind != "DockerImage") {
		return
	}
	want := a.run.Platforms
	if len(want) == 0 {
		want = b.Spec.Platforms
	}
	keys := make(map[string]bool, len(want))
	for _, p := range want {
		if parsed, err := platform.Parse(p); err == nil {
			keys[parsed.Key()] = true
		}
	}
	// A platform named twice in the status (spelled two ways) is read by
	// neither: the assembly refuses the pair.
	named := map[string]int{}
	for _, p := range b.Status.Platforms {
		if parsed, err := platform.Parse(p.Platform); err == nil {
			named[parsed.Key()]++
		}
	}
	complete := map[string]bool{}
	for _, p := range b.Status.Platforms {
		parsed, err := platform.Parse(p.Platform)
		if p.Phase != buildv1.BuildPhaseComplete || err != nil || !keys[parsed.Key()] || named[parsed.Key()] > 1 {
			continue
		}
		entries, err := manifestlist.Entries([]buildv1.BuildStatusPlatform{p})
		if err != nil {
			continue // the assembly reports it, for every platform at once
		}
		if a.reads == nil {
			a.reads = manifestlist.NewReadAhead(a.ctx, to.Name, a.run.readChild)
		}
		a.reads.Start(entries[0])
		complete[parsed.Key()] = true
	}
	// A platform that said Complete and no longer does (retried, or
	// failed after all) keeps no read under way.
	if a.reads != nil {
		for _, p := range want {
			if parsed, err := platform.Parse(p); err == nil && !complete[parsed.Key()] {
				a.reads.Stop(p)
			}
		}
	}
}

// close stops the reads under way and waits for them.
func (a *readAhead) close() {
	if a.reads != nil {
		a.reads.Close()
	}
}

// readChild reads one platform's image ahead, logging what came of it.
func (r *Run) readChild(ctx context.Context, output string, e manifestlist.Entry) (manifestlist.Child, error) {
	start := time.Now()
	c, err := r.Registry.ReadChild(ctx, output, r.Access, e)
	switch {
	case err == nil:
		r.logf("Read the image of %s (%s) in %s", e.Platform, e.Digest, time.Since(start).Round(time.Millisecond))
	case ctx.Err() == nil:
		r.logf("Reading the image of %s (%s) failed, to be read again with the others: %v", e.Platform, e.Digest, err)
	}
	return c, err
}

// finished reports whether there is nothing more to wait for: every
// platform has finished, or the build itself has ended or is being
// cancelled.
func finished(b *buildv1.Build) bool {
	return manifestlist.Terminal(b.Status.Platforms, b.Spec.Platforms) ||
		b.Status.Phase.IsTerminal() || b.Status.Cancelled
}

// waitingFor lists the platforms that have not finished, for the log.
func waitingFor(b *buildv1.Build) string {
	var waiting []string
	have := map[string]bool{}
	for _, p := range b.Status.Platforms {
		have[p.Platform] = true
		if !p.Phase.IsTerminal() {
			phase := string(p.Phase)
			if phase == "" {
				phase = "not started"
			}
			waiting = append(waiting, p.Platform+" ("+phase+")")
		}
	}
	for _, p := range b.Spec.Platforms {
		if !have[p] {
			waiting = append(waiting, p+" (no status yet)")
		}
	}
	if len(waiting) == 0 {
		return "the build's platforms to be listed in its status"
	}
	return strings.Join(waiting, ", ")
}

// platformTags are the per-platform tags to remove, computed from the
// Build's spec alone: platform.Tags of the output and the platforms the
// controller resolved (r.Platforms, from the pod's $BUILD), else the
// Build's spec.platforms. A reference read from status is never removed:
// any writer of a status entry could name another tag of the repository
// (its :prod) there. The output tag itself is never among them.
func (r *Run) platformTags(b *buildv1.Build, output string) []string {
	platforms := r.Platforms
	if len(platforms) == 0 {
		platforms = b.Spec.Platforms
	}
	if len(platforms) == 0 {
		r.logf("Warning: neither $%s nor the Build's spec.platforms lists the platforms: no per-platform tag is removed", buildv1.BuildEnv)
	}
	tags, err := platform.Tags(output, platforms)
	if err != nil {
		r.logf("Warning: %v", err)
	}
	if tag := binaryTag(b, output); tag != "" {
		tags = append(tags, tag)
	}
	return tags
}

// binaryTag is the tag that kept the Build's binary input (its artifact,
// stored by build-controller in the output's repository) until every
// platform's pod had read it, "" for none. This pod removes it once every
// platform has finished (or ended), so the tag is done with. Only an artifact in the output's
// repository is untagged, by the tag its digest names.
func binaryTag(b *buildv1.Build, output string) string {
	src := b.Spec.Source.Binary
	if src == nil || src.Artifact == "" {
		return ""
	}
	return artifact.TagFor(src.Artifact, output)
}

// untag removes the per-platform tags (those already gone are no error).
func (r *Run) untag(ctx context.Context, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), untagTimeout)
	defer cancel()
	start := time.Now()
	if err := r.Registry.Untag(ctx, r.Access, tags...); err != nil {
		return err
	}
	r.logf("Removed the per-platform tags %s in %s", strings.Join(tags, ", "), time.Since(start).Round(time.Millisecond))
	return nil
}

// recordedCommit is the commit the Build's spec.revision names, "" for
// none.
func recordedCommit(b *buildv1.Build) string {
	if r := b.Spec.Revision; r != nil && r.Git != nil {
		return r.Git.Commit
	}
	return ""
}

// describePhase says how a Build ended: "Failed: PlatformBuildFailed".
func describePhase(b *buildv1.Build) string {
	if b.Status.Reason == "" {
		return string(b.Status.Phase)
	}
	return string(b.Status.Phase) + ": " + string(b.Status.Reason)
}

// recordOutput writes the manifest list's digest and the output reference
// to the Build's status with server-side apply, touching nothing else.
func (r *Run) recordOutput(ctx context.Context, output string, res *manifestlist.Result) error {
	return r.applyStatus(ctx, map[string]any{
		"outputDockerImageReference": output,
		"output":                     map[string]any{"to": map[string]any{"imageDigest": res.Digest.String()}},
	})
}

func (r *Run) applyStatus(ctx context.Context, status map[string]any) error {
	if r.PodUID != "" {
		uid := r.PodUID
		if err := report.AwaitRecorded(ctx, r.Builds, r.Key, func(b *buildv1.Build) bool { return b.Status.PodUID == uid }); err != nil {
			return err
		}
	}
	return r.Builds.ApplyStatus(ctx, r.Key, FieldManager, status)
}

// fail reports why no manifest list was pushed: in the log, in the Build's
// status.reason and status.message (when there is a Build that has not
// ended: a reason the controller already gave an ended Build stays), and in
// the pod's termination message, for the controller to set the phase.
func (r *Run) fail(ctx context.Context, build *buildv1.Build, reason buildv1.StatusReason, err error) error {
	r.logf("No manifest list pushed: %s: %v", reason, err)
	if build != nil && !build.Status.Phase.IsTerminal() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if aerr := r.applyStatus(wctx, map[string]any{"reason": string(reason), "message": err.Error()}); aerr != nil {
			r.logf("Warning: recording the failure in Build %s: %v", r.Key, aerr)
		}
	}
	if r.TerminationLog != "" {
		if _, serr := os.Stat(r.TerminationLog); serr == nil {
			_ = os.WriteFile(r.TerminationLog, []byte(string(reason)+": "+err.Error()), 0o644)
		}
	}
	return fmt.Errorf("%s: %w", reason, err)
}

func (r *Run) printResult(res *manifestlist.Result, took time.Duration) {
	r.logf("Pushed %s (%s) in %s", res.Reference, res.MediaType, took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(r.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLATFORM\tLISTED AS\tDIGEST\tSIZE\tMEDIA TYPE")
	for _, c := range res.Children {
		listed := c.Config.OS + "/" + c.Config.Architecture
		if c.Config.Variant != "" {
			listed += "/" + c.Config.Variant
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", c.Platform, listed, c.Digest, c.Size, c.MediaType)
	}
	_ = tw.Flush()
}
