package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.podman.io/image/v5/docker/reference"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagebuild"
	"github.com/archway-build/archway/pkg/build/report"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/platform"
)

// manifestListFieldManager is the field manager of everything `builder
// manifest-list` writes to a Build's status, so that its fields never
// collide with the controller's or the platform pods'.
const manifestListFieldManager = "archway-builder-manifest-list"

// untagTimeout bounds the untagging at the end, which runs even when the
// wait for the platforms ran out of time.
const untagTimeout = 2 * time.Minute

type manifestListOptions struct {
	kubeconfig     string
	build          string // namespace/name, instead of $BUILD
	authFile       string
	insecure       bool
	insecureRegs   []string
	waitTimeout    time.Duration
	terminationLog string
}

func newManifestListCommand() *cobra.Command {
	opts := manifestListOptions{}
	cmd := &cobra.Command{
		Use:   "manifest-list",
		Short: "Wait for every platform of a Build, push its manifest list and untag the per-platform images",
		Long: `manifest-list runs in the last pod of a multi-platform Build. It reads the Build named by
$BUILD (the Build as JSON, as in every build pod) from the apiserver, waits until every entry of
status.platforms has finished, and then:

  - checks for version skew: a platform recorded Complete without an image digest, an image digest
    the output repository does not hold, or an image config for another platform fails the build
    with reason PlatformVersionSkew, naming the platform;
  - leaves out failed platforms listed in spec.platformsAllowedToFail, and fails (reason
    PlatformBuildFailed) when another platform failed;
  - pushes an OCI image index (a Docker manifest list when every image is Docker schema 2) of the
    platforms that succeeded to spec.output.to, and records its digest in
    status.output.to.imageDigest and the output in status.outputDockerImageReference;
  - removes every per-platform tag (DELETE of the tag, never of a digest), also when the build
    failed; untag errors are logged and ignored.

When the Build has already ended Failed, Error or Cancelled (the controller starts this pod then,
once every platform pod has ended, so that no late push can tag again), it only removes the
per-platform tags, and fails when they cannot be removed.

Registry credentials come from the docker config in $PUSH_DOCKERCFG_PATH (or --authfile).
Loopback registries and those named with --insecure-registry are reached without TLS checks.
The exit code is 0 when the manifest list was pushed and 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManifestList(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	f.StringVar(&opts.build, "build", "", "the Build as namespace/name, instead of reading $"+buildv1.BuildEnv)
	f.StringVar(&opts.authFile, "authfile", "", "docker config file with the push credentials (default: the one in $"+buildv1.PushDockerConfigPathEnv+")")
	f.BoolVar(&opts.insecure, "insecure", false, "reach every registry over plain HTTP or without TLS verification")
	f.StringSliceVar(&opts.insecureRegs, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are; registries.conf can also mark them)")
	f.DurationVar(&opts.waitTimeout, "wait-timeout", 2*time.Hour, "how long to wait for the platforms to finish (bounded further by spec.completionDeadlineSeconds)")
	f.StringVar(&opts.terminationLog, "termination-log", "/dev/termination-log", "file to write the failure reason to, if it exists (the pod's termination message)")
	return cmd
}

func runManifestList(ctx context.Context, opts manifestListOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	key, err := buildKey(opts.build)
	if err != nil {
		return err
	}
	authFile := opts.authFile
	if authFile == "" {
		if authFile, err = manifestlist.AuthFileFromDir(os.Getenv(buildv1.PushDockerConfigPathEnv)); err != nil {
			return err
		}
	}
	c, err := report.NewClient(opts.kubeconfig, "archway-builder-manifest-list")
	if err != nil {
		return err
	}
	ml := &manifestListRun{
		client:             c,
		key:                key,
		access:             manifestlist.Access{AuthFile: authFile, Insecure: opts.insecure},
		insecureRegistries: opts.insecureRegs,
		out:                out,
		terminationLog:     opts.terminationLog,
	}
	return ml.run(ctx, opts.waitTimeout)
}

// buildKey names the Build: --build, else the metadata of the Build in
// $BUILD.
func buildKey(flag string) (types.NamespacedName, error) {
	if flag != "" {
		ns, name, ok := strings.Cut(flag, "/")
		if !ok || ns == "" || name == "" {
			return types.NamespacedName{}, fmt.Errorf("--build %q: want namespace/name", flag)
		}
		return types.NamespacedName{Namespace: ns, Name: name}, nil
	}
	raw := os.Getenv(buildv1.BuildEnv)
	if raw == "" {
		return types.NamespacedName{}, fmt.Errorf("no Build: set $%s to the Build as JSON (as build pods have it) or pass --build namespace/name", buildv1.BuildEnv)
	}
	var b buildv1.Build
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return types.NamespacedName{}, fmt.Errorf("reading the Build in $%s: %w", buildv1.BuildEnv, err)
	}
	if b.Name == "" || b.Namespace == "" {
		return types.NamespacedName{}, fmt.Errorf("the Build in $%s has no name or namespace", buildv1.BuildEnv)
	}
	return types.NamespacedName{Namespace: b.Namespace, Name: b.Name}, nil
}

// manifestListRun is one run of `builder manifest-list`.
type manifestListRun struct {
	client *report.Client
	key    types.NamespacedName
	access manifestlist.Access
	// insecureRegistries are reached without TLS checks, as are loopback
	// registries (as docker-build does).
	insecureRegistries []string
	out                io.Writer
	terminationLog     string
}

func (r *manifestListRun) logf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *manifestListRun) run(ctx context.Context, waitTimeout time.Duration) error {
	build, waitErr := r.wait(ctx, waitTimeout)
	start := time.Now()
	if build == nil {
		return r.fail(ctx, nil, buildv1.StatusReasonManifestListFailed, waitErr)
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
	if host := registryOf(output); host != "" && (slices.Contains(r.insecureRegistries, host) || imagebuild.IsLoopback(host)) {
		r.access.Insecure = true
	}
	tags := r.platformTags(build, output)
	if waitErr == nil && build.Status.Phase.IsTerminal() && build.Status.Phase != buildv1.BuildPhaseComplete {
		// The controller starts this pod for a Build that ended without a
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
			r.logf("Warning: recording the removal in Build %s: %v", r.key, err)
		}
		if untagErr != nil {
			return r.fail(ctx, nil, buildv1.StatusReasonManifestListFailed, fmt.Errorf("removing the per-platform tags: %w", untagErr))
		}
		return nil
	}
	// Untag at the end whatever happens: after a push, a failure, or running
	// out of time.
	defer func() {
		if err := r.untag(ctx, tags); err != nil {
			// A courtesy to the registry here: never a reason to fail.
			r.logf("Warning: removing per-platform tags: %v", err)
		}
	}()

	if waitErr != nil {
		return r.fail(ctx, build, buildv1.StatusReasonManifestListFailed, waitErr)
	}
	if build.Status.Cancelled {
		return r.fail(ctx, nil, buildv1.StatusReasonCancelledBuild, errors.New("the build was cancelled"))
	}
	sel, err := manifestlist.Select(build.Status.Platforms, build.Spec.PlatformsAllowedToFail)
	if err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	for _, p := range sel.Skipped {
		r.logf("Leaving out %s, which is allowed to fail: %s %s %s", p.Platform, p.Phase, p.Reason, p.Message)
	}
	entries, err := manifestlist.Entries(sel.Included)
	if err != nil {
		return r.fail(ctx, build, manifestlist.ReasonOf(err), err)
	}
	r.logf("Pushing the manifest list of %d platforms to %s", len(entries), output)
	res, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries, Access: r.access})
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
// itself has). It reads and then watches the one Build from the version it
// read, so a change between the two is never missed. When a watch ends it
// reads the Build again (noticing its deletion) and watches from its current
// state, after a pause that grows while watches keep ending. On error it
// also returns the last Build it saw, if any, so the per-platform tags can
// still be removed.
func (r *manifestListRun) wait(ctx context.Context, timeout time.Duration) (*buildv1.Build, error) {
	var build *buildv1.Build
	get := func(ctx context.Context) (string, error) {
		b, err := r.client.Get(ctx, r.key)
		if err != nil {
			return "", err
		}
		build = b
		return b.ResourceVersion, nil
	}
	rv, err := get(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading Build %s: %w", r.key, err)
	}
	if d := build.Spec.CompletionDeadlineSeconds; d != nil && *d > 0 {
		deadline := time.Duration(*d) * time.Second
		if build.Status.StartTimestamp != nil {
			deadline -= time.Since(build.Status.StartTimestamp.Time)
		}
		timeout = min(timeout, max(deadline, time.Minute))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	lastWaiting := ""
	done := func() bool {
		if finished(build) {
			return true
		}
		if w := waitingFor(build); w != lastWaiting {
			r.logf("Waiting for %s", w)
			lastWaiting = w
		}
		return false
	}
	timedOut := func() error {
		return fmt.Errorf("platforms still not finished after %s: %s", timeout.Round(time.Second), waitingFor(build))
	}
	pause := watchRestartPause
	for !done() {
		w, err := r.client.Watch(ctx, r.key, rv)
		if err == nil {
			_, err = r.consume(ctx, w, &build, rv, done)
			w.Stop()
		}
		switch {
		case err == nil:
			return build, nil
		case ctx.Err() != nil:
			return build, timedOut()
		case apierrors.IsNotFound(err):
			return build, fmt.Errorf("the Build %s was deleted while waiting for its platforms", r.key)
		}
		// The watch ended, or the version it started from is too old to
		// resume from (410 Gone, when the Build has not changed for longer
		// than the apiserver keeps history): read again, then watch from
		// the current state ("" sends it first).
		select {
		case <-ctx.Done():
			return build, timedOut()
		case <-time.After(pause):
		}
		pause = min(2*pause, maxWatchRestartPause)
		if _, err := get(ctx); err != nil {
			if ctx.Err() != nil {
				return build, timedOut()
			}
			return build, fmt.Errorf("reading Build %s: %w", r.key, err)
		}
		rv = ""
	}
	return build, nil
}

// The pause before watching the Build again after a watch ended: it doubles
// while watches keep ending, up to the maximum.
const (
	watchRestartPause    = 100 * time.Millisecond
	maxWatchRestartPause = 5 * time.Second
)

// errWatchEnded says a watch must be started again.
var errWatchEnded = errors.New("watch ended")

// consume reads watch events into *build until done says so (nil error) or
// the watch ends (errWatchEnded, or the watch's error). It returns the last
// resource version seen.
func (r *manifestListRun) consume(ctx context.Context, w watch.Interface, build **buildv1.Build, rv string, done func() bool) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, errWatchEnded
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				b, err := report.BuildFromUnstructured(u)
				if err != nil {
					return rv, err
				}
				*build, rv = b, b.ResourceVersion
				if done() {
					return rv, nil
				}
			case watch.Bookmark:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					rv = u.GetResourceVersion()
				}
			case watch.Deleted:
				return rv, apierrors.NewNotFound(buildv1.Resource("builds"), r.key.Name)
			case watch.Error:
				return rv, fmt.Errorf("%w: %w", errWatchEnded, apierrors.FromObject(ev.Object))
			}
		}
	}
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

// platformTags are the per-platform tags to remove: one for every platform
// the Build targets or has a status entry for, plus any other tag of the
// output's repository a platform recorded pushing to. The output tag itself
// is never among them.
func (r *manifestListRun) platformTags(b *buildv1.Build, output string) []string {
	var platforms []string
	platforms = append(platforms, b.Spec.Platforms...)
	for _, p := range b.Status.Platforms {
		platforms = append(platforms, p.Platform)
	}
	tags, err := platform.Tags(output, platforms)
	if err != nil {
		r.logf("Warning: %v", err)
	}
	for _, p := range b.Status.Platforms {
		if tag, ok := otherTagOfRepository(p.OutputDockerImageReference, output); ok && !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	return tags
}

// otherTagOfRepository returns ref spelled in full when it names a tag (and
// no digest) in output's repository other than output's own tag.
func otherTagOfRepository(ref, output string) (string, bool) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", false
	}
	tagged, ok := named.(reference.NamedTagged)
	if _, digested := named.(reference.Digested); !ok || digested {
		return "", false
	}
	out, err := reference.ParseNormalizedNamed(output)
	if err != nil {
		return "", false
	}
	outTagged, ok := reference.TagNameOnly(out).(reference.NamedTagged)
	if !ok || out.Name() != named.Name() || outTagged.Tag() == tagged.Tag() {
		return "", false
	}
	return tagged.String(), true
}

// untag removes the per-platform tags (those already gone are no error).
func (r *manifestListRun) untag(ctx context.Context, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), untagTimeout)
	defer cancel()
	start := time.Now()
	if err := manifestlist.Untag(ctx, r.access, tags...); err != nil {
		return err
	}
	r.logf("Removed the per-platform tags %s in %s", strings.Join(tags, ", "), time.Since(start).Round(time.Millisecond))
	return nil
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
func (r *manifestListRun) recordOutput(ctx context.Context, output string, res *manifestlist.Result) error {
	return r.applyStatus(ctx, map[string]any{
		"outputDockerImageReference": output,
		"output":                     map[string]any{"to": map[string]any{"imageDigest": res.Digest.String()}},
	})
}

func (r *manifestListRun) applyStatus(ctx context.Context, status map[string]any) error {
	return r.client.ApplyStatus(ctx, r.key, manifestListFieldManager, status)
}

// fail reports why no manifest list was pushed: in the log, in the Build's
// status.reason and status.message (when there is a Build that has not
// ended: a reason the controller already gave an ended Build stays), and in
// the pod's termination message, for the controller to set the phase.
func (r *manifestListRun) fail(ctx context.Context, build *buildv1.Build, reason buildv1.StatusReason, err error) error {
	r.logf("No manifest list pushed: %s: %v", reason, err)
	if build != nil && !build.Status.Phase.IsTerminal() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if aerr := r.applyStatus(wctx, map[string]any{"reason": string(reason), "message": err.Error()}); aerr != nil {
			r.logf("Warning: recording the failure in Build %s: %v", r.key, aerr)
		}
	}
	if r.terminationLog != "" {
		if _, serr := os.Stat(r.terminationLog); serr == nil {
			_ = os.WriteFile(r.terminationLog, []byte(string(reason)+": "+err.Error()), 0o644)
		}
	}
	return fmt.Errorf("%s: %w", reason, err)
}

func (r *manifestListRun) printResult(res *manifestlist.Result, took time.Duration) {
	r.logf("Pushed %s (%s) in %s", res.Reference, res.MediaType, took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(r.out, 0, 4, 2, ' ', 0)
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

// registryOf returns the registry ("host" or "host:port") of an image
// reference, or "" when it does not parse.
func registryOf(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return reference.Domain(named)
}
