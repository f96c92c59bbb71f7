package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.podman.io/buildah/pkg/parse"
	"golang.org/x/sync/semaphore"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// maxDefaultJobs bounds how many platforms `builder build` builds at once
// unless told otherwise: foreign platforms run under qemu and are CPU-bound.
const maxDefaultJobs = 4

type localBuildOptions struct {
	platforms          []string
	tag                string
	file               string
	target             string
	secrets            []string
	buildArgs          []string
	labels             []string
	volumes            []string
	allowFail          []string
	jobs               int
	noCache            bool
	pull               bool
	layers             bool
	squash             bool
	format             string
	workDir            string
	authFile           string
	insecureRegistries []string
	storageDriver      string
	isolation          string
	keepPlatformTags   bool
	cacheRepo          string
}

func newBuildCommand() *cobra.Command {
	opts := localBuildOptions{}
	cmd := &cobra.Command{
		Use:   "build [flags] CONTEXT",
		Short: "Build a Dockerfile for several platforms and push them as one manifest list, without a cluster",
		Long: `build builds CONTEXT's Dockerfile for every platform of --platform, several at once, as a
multi-platform Build does in a cluster: each platform's image is pushed to its own tag in the
repository of --tag (the tag plus a platform suffix), then the manifest list of the platforms that
succeeded is pushed to --tag and the per-platform tags are removed. Platforms in --allow-fail may
fail without failing the build; they are left out of the list.

It prints each platform's build output prefixed with the platform, then the manifest list's digest
and a table of the platforms with their digests and durations. Without --tag the images are only
built. The exit code is 0 when every platform not allowed to fail succeeded (and the list was
pushed), else 1.`,
		Example: `  builder build --platform linux/amd64,linux/arm64,linux/ppc64le,linux/s390x \
    -t registry.example.com/team/app:v1 --allow-fail linux/s390x .`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A kept work directory keeps its layers for the next build
			// unless told otherwise.
			if opts.workDir != "" && !cmd.Flags().Changed("layers") {
				opts.layers = true
			}
			if opts.squash && opts.cacheRepo != "" {
				return fmt.Errorf("--squash commits one layer and --cache-repo keeps a layer per step: use one or the other")
			}
			return runLocalBuild(cmd.Context(), opts, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.platforms, "platform", nil, "target platforms, os/arch[/variant], comma-separated or repeated (default: this machine's)")
	f.StringVarP(&opts.tag, "tag", "t", "", "image reference to push the manifest list to (default: build only)")
	f.StringVarP(&opts.file, "file", "f", "", "Dockerfile, relative to CONTEXT or absolute (default: CONTEXT/Dockerfile)")
	f.StringVar(&opts.target, "target", "", "stage to build and push, by its name, as docker buildx build --target (default: the last stage)")
	f.StringArrayVar(&opts.secrets, "secret", nil, "secret for RUN --mount=type=secret, as docker buildx build --secret: id=ID[,src=FILE|,env=VAR] (default source: the file or environment variable named ID); never stored in the image; repeatable")
	f.StringArrayVar(&opts.buildArgs, "build-arg", nil, "ARG value, NAME=VALUE (or NAME, from the environment); repeatable")
	f.StringArrayVar(&opts.labels, "label", nil, "image label, NAME=VALUE; repeatable")
	f.StringArrayVarP(&opts.volumes, "volume", "v", nil, "bind mount for RUN steps, SOURCE:DESTINATION[:ro], left out of the image; repeatable")
	f.StringSliceVar(&opts.allowFail, "allow-fail", nil, "platforms that may fail without failing the build; comma-separated or repeated")
	f.IntVarP(&opts.jobs, "jobs", "j", 0, fmt.Sprintf("platforms built at once (default: all, at most %d)", maxDefaultJobs))
	f.BoolVar(&opts.noCache, "no-cache", false, "do not use cached layers")
	f.BoolVar(&opts.pull, "pull", false, "pull base images even when the store has them")
	f.BoolVar(&opts.layers, "layers", false, "keep an image per step, for later builds with the same --work-dir (default: true with --work-dir)")
	f.BoolVar(&opts.squash, "squash", false, "commit the layers the build adds as one, on top of the base image's layers (OpenShift's imageOptimizationPolicy SkipLayers; default: a layer per instruction, as docker build)")
	f.StringVar(&opts.cacheRepo, "cache-repo", "", "registry repository for a layer cache, one per platform (REPO-linux-arm64, ...): steps are looked up there before they run and pushed there after (--no-cache: not looked up)")
	f.StringVar(&opts.format, "format", string(image.FormatOCI), "manifest format of the images: oci or docker")
	f.StringVar(&opts.workDir, "work-dir", "", "directory for the container store and caches, kept afterwards: a later build with the same Dockerfile, context, args and base images reuses its images (default: a temporary directory, removed)")
	f.StringVar(&opts.authFile, "authfile", "", "docker config file (or directory holding one) with registry credentials for pulling and pushing")
	f.StringSliceVar(&opts.insecureRegistries, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are)")
	f.StringVar(&opts.storageDriver, "storage-driver", "", "container store driver: overlay or vfs (default: overlay when it works, else vfs)")
	f.StringVar(&opts.isolation, "isolation", "auto", "how RUN steps run: oci (in runc containers; needs root outside a user namespace), chroot, or auto: oci when runc is on PATH and it can run, else chroot")
	f.BoolVar(&opts.keepPlatformTags, "keep-platform-tags", false, "leave the per-platform tags in the registry")
	return cmd
}

// platformResult is how one platform's build ended.
type platformResult struct {
	platform string
	tag      string // the per-platform tag pushed to; empty when nothing was pushed
	out      image.Output
	took     time.Duration // wall time of the platform's build and push
	err      error
	// cancelledBy is set when the build was stopped before it ended: the
	// platform not allowed to fail that failed, or why the build was
	// interrupted.
	cancelledBy error
}

// requiredFailedError is why the platforms still building are stopped: a
// platform that is not allowed to fail failed.
type requiredFailedError struct{ platform string }

func (e *requiredFailedError) Error() string {
	return e.platform + ", which is not allowed to fail, failed"
}

func runLocalBuild(ctx context.Context, opts localBuildOptions, contextDir string, stdout io.Writer) error {
	start := time.Now()
	plan, err := planLocalBuild(opts)
	if err != nil {
		return err
	}
	auth, err := registry.FindAuthFile(opts.authFile)
	if err != nil {
		return err
	}
	workDir := opts.workDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "archway-build-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(workDir) }()
	}
	uidMap, _ := os.ReadFile("/proc/self/uid_map")
	isolation, runtime, err := chooseIsolation(opts.isolation, exec.LookPath, os.Geteuid(), string(uidMap))
	if err != nil {
		return err
	}
	b, err := image.New(image.Config{
		WorkDir:            workDir,
		StorageDriver:      opts.storageDriver,
		InsecureRegistries: opts.insecureRegistries,
		Isolation:          isolation,
		OCIRuntime:         runtime,
		// A temporary work directory goes with its store at the end.
		Disposable: opts.workDir == "",
	})
	if err != nil {
		return err
	}
	defer closeBuilder(b, stdout)
	// buildah writes some temporary files to $TMPDIR.
	if err := os.Setenv("TMPDIR", b.TempDir()); err != nil {
		return err
	}

	out := &lockedWriter{w: stdout}
	printf(out, "Building %s for %s (%d at once, %s store in %s, %s isolation)\n",
		filepath.Clean(contextDir), strings.Join(plan.platforms, ", "), plan.jobs, b.StorageDriver(), workDir, b.Isolation())
	results := buildPlatforms(ctx, b, plan, opts, contextDir, auth, out)

	var pushed []string
	for _, r := range results {
		// A platform stopped during its push may have tagged its image
		// with no digest to show: its tag goes too (a tag that is not
		// there is no error).
		if r.out.Pushed.Digest != "" || (r.cancelledBy != nil && plan.output != "") {
			tag, _ := platform.Tag(plan.output, r.platform) // checked by planLocalBuild
			pushed = append(pushed, tag)
		}
	}
	var index *manifestlist.Result
	var listErr error
	if plan.output != "" {
		access := registry.Access{AuthFile: auth, InsecureRegistries: opts.insecureRegistries, UserAgent: "archway-builder"}
		index, listErr = pushIndex(ctx, plan, results, access)
		if !opts.keepPlatformTags && len(pushed) > 0 {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			if err := manifestlist.Untag(uctx, access, pushed...); err != nil {
				printf(out, "Warning: removing the per-platform tags: %v\n", err)
			}
			cancel()
		}
	} else {
		_, listErr = manifestlist.Select(platformStatuses(results), plan.allowFail)
	}
	printSummary(stdout, plan, results, index, time.Since(start))
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	if listErr != nil {
		return fmt.Errorf("%s: %w", manifestlist.ReasonOf(listErr), listErr)
	}
	return nil
}

// chooseIsolation resolves --isolation: auto is OCI isolation when an OCI
// runtime (runc) is on PATH and the builder is root outside any user
// namespace (uidMap is /proc/self/uid_map), as runc needs, else chroot.
// OCI isolation starts each RUN step with less work: chroot isolation
// copies the builder's binary into memory twice per step.
func chooseIsolation(flag string, lookPath func(string) (string, error), euid int, uidMap string) (image.Isolation, string, error) {
	fullRoot := euid == 0 && strings.Join(strings.Fields(uidMap), " ") == "0 0 4294967295"
	switch flag {
	case "chroot":
		return image.IsolationChroot, "", nil
	case "oci":
		runtime, err := lookPath("runc")
		if err != nil {
			return "", "", fmt.Errorf("--isolation oci needs runc on PATH: %w", err)
		}
		if !fullRoot {
			return "", "", errors.New("--isolation oci needs root outside any user namespace: use --isolation chroot")
		}
		return image.IsolationOCI, runtime, nil
	case "auto", "":
		if runtime, err := lookPath("runc"); err == nil && fullRoot {
			return image.IsolationOCI, runtime, nil
		}
		return image.IsolationChroot, "", nil
	default:
		return "", "", fmt.Errorf("--isolation %q: use auto, oci or chroot", flag)
	}
}

// localPlan is a `builder build` checked and resolved.
type localPlan struct {
	platforms []string // as given, in order
	allowFail []string
	output    string // the manifest list's reference; empty to build only
	buildArgs map[string]string
	labels    map[string]string
	jobs      int
	format    image.Format
	// caches are the platforms' cache repositories, by platform as given.
	caches map[string]string
}

// planLocalBuild checks opts and resolves the defaults: this machine's
// platform, the number of jobs, build args from the environment.
func planLocalBuild(opts localBuildOptions) (localPlan, error) {
	plan := localPlan{platforms: opts.platforms, allowFail: opts.allowFail}
	if len(plan.platforms) == 0 {
		plan.platforms = []string{image.HostPlatform().String()}
	}
	parsed, err := platform.ParseList(plan.platforms)
	if err != nil {
		return localPlan{}, fmt.Errorf("--platform: %w", err)
	}
	keys := make([]string, len(parsed))
	for i, p := range parsed {
		keys[i] = p.Key()
	}
	for _, a := range plan.allowFail {
		p, err := platform.Parse(a)
		if err != nil {
			return localPlan{}, fmt.Errorf("--allow-fail: %w", err)
		}
		if !slices.Contains(keys, p.Key()) {
			return localPlan{}, fmt.Errorf("--allow-fail %s is not one of the platforms built (%s)", a, strings.Join(plan.platforms, ", "))
		}
	}
	if opts.tag != "" {
		// The manifest list's tag; the per-platform tags derive from it.
		if _, err := platform.Tag(opts.tag, plan.platforms[0]); err != nil {
			return localPlan{}, fmt.Errorf("--tag: %w", err)
		}
		plan.output = opts.tag
	}
	if plan.buildArgs, err = parseKeyValues(opts.buildArgs, true); err != nil {
		return localPlan{}, fmt.Errorf("--build-arg: %w", err)
	}
	if plan.labels, err = parseKeyValues(opts.labels, false); err != nil {
		return localPlan{}, fmt.Errorf("--label: %w", err)
	}
	if err := checkSecrets(opts.secrets); err != nil {
		return localPlan{}, err
	}
	plan.jobs = opts.jobs
	if plan.jobs <= 0 {
		plan.jobs = min(len(plan.platforms), maxDefaultJobs)
	}
	if opts.cacheRepo != "" {
		plan.caches = make(map[string]string, len(plan.platforms))
		for _, p := range plan.platforms {
			if plan.caches[p], err = platform.CacheRepository(opts.cacheRepo, p); err != nil {
				return localPlan{}, fmt.Errorf("--cache-repo: %w", err)
			}
		}
	}
	switch image.Format(opts.format) {
	case image.FormatOCI, "":
		plan.format = image.FormatOCI
	case image.FormatDocker:
		plan.format = image.FormatDocker
	default:
		return localPlan{}, fmt.Errorf("--format %q: use oci or docker", opts.format)
	}
	return plan, nil
}

// parseKeyValues parses NAME=VALUE flags. With fromEnv, a bare NAME takes
// its value from the environment (and is left out when it is not set), as
// docker build --build-arg does.
func parseKeyValues(kvs []string, fromEnv bool) (map[string]string, error) {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		name, value, ok := strings.Cut(kv, "=")
		if name == "" {
			return nil, fmt.Errorf("%q has no name", kv)
		}
		if !ok {
			if !fromEnv {
				return nil, fmt.Errorf("%q: want NAME=VALUE", kv)
			}
			if value, ok = os.LookupEnv(name); !ok {
				continue
			}
		}
		out[name] = value
	}
	return out, nil
}

// buildPlatforms builds, pushes and reads back every platform, plan.jobs at
// a time, and returns the results in the order of plan.platforms. When a
// platform that is not allowed to fail fails, or ctx ends, the platforms
// still building are stopped at once, their running RUN steps killed, and
// their results say so (cancelledBy).
func buildPlatforms(ctx context.Context, b *image.Builder, plan localPlan, opts localBuildOptions,
	contextDir string, auth registry.AuthFile, out io.Writer) []platformResult {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]platformResult, len(plan.platforms))
	sem := semaphore.NewWeighted(int64(plan.jobs))
	var wg sync.WaitGroup
	for i, p := range plan.platforms {
		wg.Go(func() {
			results[i] = platformResult{platform: p}
			if err := sem.Acquire(ctx, 1); err != nil {
				results[i].err = err
				results[i].cancelledBy = context.Cause(ctx)
				return
			}
			defer sem.Release(1)
			results[i] = buildPlatform(ctx, b, plan, opts, contextDir, auth, p, out)
			if results[i].err != nil && results[i].cancelledBy == nil && !mayFail(plan, p) {
				cancel(&requiredFailedError{platform: p})
			}
		})
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stopRunStepsUntil(ctx, done, out)
	}()
	wg.Wait()
	close(done)
	<-stopped
	return results
}

// stopStepsEvery is how often the RUN steps are stopped again after the
// builds were told to stop, until they have returned: a build that was
// between steps starts its next one before it notices.
const stopStepsEvery = 50 * time.Millisecond

// stopRunStepsUntil waits until ctx ends, then kills every RUN step this
// process runs, again and again, until done is closed: buildah ignores the
// context while a step runs.
func stopRunStepsUntil(ctx context.Context, done <-chan struct{}, out io.Writer) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	printf(out, "Stopping the platforms still building: %v\n", context.Cause(ctx))
	tick := time.NewTicker(stopStepsEvery)
	defer tick.Stop()
	for {
		if _, err := image.StopRunSteps(); err != nil {
			printf(out, "Warning: stopping the RUN steps: %v\n", err)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// mayFail reports whether p is one of the platforms allowed to fail.
func mayFail(plan localPlan, p string) bool {
	return slices.ContainsFunc(plan.allowFail, func(a string) bool { return samePlatform(a, p) })
}

func buildPlatform(ctx context.Context, b *image.Builder, plan localPlan, opts localBuildOptions,
	contextDir string, auth registry.AuthFile, p string, out io.Writer) (res platformResult) {
	start := time.Now()
	res = platformResult{platform: p}
	defer func() { res.took = time.Since(start) }()
	target, _ := platform.Parse(p) // checked by planLocalBuild
	log := newPrefixWriter(out, "["+p+"] ")
	defer func() { _ = log.Flush() }()
	if plan.output != "" {
		res.tag, _ = platform.Tag(plan.output, p) // checked by planLocalBuild
	}
	req := image.Request{
		ContextDir: contextDir,
		Dockerfile: opts.file,
		Target:     opts.target,
		Secrets:    opts.secrets,
		Platform:   target,
		Args:       plan.buildArgs,
		Labels:     plan.labels,
		RunMounts:  opts.volumes,
		NoCache:    opts.noCache,
		ForcePull:  opts.pull,
		Layers:     opts.layers,
		Squash:     opts.squash,
		// A kept work directory keeps each platform's result for the
		// next build with the same inputs.
		ReuseResults: opts.workDir != "",
		Format:       plan.format,
		PullAuth:     auth,
		Out:          log,
	}
	if repo := plan.caches[p]; repo != "" {
		req.Cache = &image.Cache{Repository: repo, Auth: auth}
	}
	res.out, res.err = b.BuildAndPush(ctx, req, res.tag, auth)
	if res.out.Pushed.Digest == "" {
		res.tag = ""
	}
	if res.err != nil && ctx.Err() != nil {
		res.cancelledBy = context.Cause(ctx)
	}
	switch {
	case res.cancelledBy != nil:
		printf(log, "Cancelled after %s: %v\n", time.Since(start).Round(100*time.Millisecond), res.cancelledBy)
	case res.err != nil:
		printf(log, "FAILED (%s): %v\n", report.Reason(res.err), res.err)
	case res.tag != "":
		printf(log, "Done in %s: pushed %s as %s\n", time.Since(start).Round(100*time.Millisecond),
			res.out.Pushed.Digest, res.tag)
	default:
		printf(log, "Done in %s: built %s\n", time.Since(start).Round(100*time.Millisecond), shortID(res.out.Build.ImageID))
	}
	return res
}

// platformStatuses returns the results as the status entries a cluster
// build's platform pods would write.
func platformStatuses(results []platformResult) []buildv1.BuildStatusPlatform {
	out := make([]buildv1.BuildStatusPlatform, 0, len(results))
	for _, r := range results {
		s := buildv1.BuildStatusPlatform{Platform: r.platform, Phase: buildv1.BuildPhaseComplete, OutputDockerImageReference: r.tag}
		switch {
		case r.cancelledBy != nil:
			s.Phase = buildv1.BuildPhaseCancelled
			s.Reason = buildv1.StatusReasonCancelledBuild
			s.Message = "cancelled: " + r.cancelledBy.Error()
		case r.err != nil:
			s.Phase = buildv1.BuildPhaseFailed
			s.Reason = report.Reason(r.err)
			s.Message = r.err.Error()
		case r.out.Image.Digest != "":
			s.Output = report.PlatformOutput(r.out.Image)
		}
		out = append(out, s)
	}
	return out
}

// pushIndex selects the platforms that go into the manifest list and pushes
// it to plan.output.
func pushIndex(ctx context.Context, plan localPlan, results []platformResult, access registry.Access) (*manifestlist.Result, error) {
	sel, err := manifestlist.Select(platformStatuses(results), plan.allowFail)
	if err != nil {
		return nil, err
	}
	entries, err := manifestlist.Entries(sel.Included)
	if err != nil {
		return nil, err
	}
	res, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: plan.output, Entries: entries, Access: access})
	if err != nil {
		return nil, fmt.Errorf("pushing the manifest list to %s: %w", plan.output, err)
	}
	return res, nil
}

func printSummary(w io.Writer, plan localPlan, results []platformResult, index *manifestlist.Result, took time.Duration) {
	printf(w, "\n")
	if index != nil {
		printf(w, "Manifest list %s pushed to %s\n", index.Digest, plan.output)
		printf(w, "  %s\n", index.Reference)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printf(tw, "PLATFORM\tSTATUS\tDIGEST\tBUILD\tPUSH\tTOTAL\n")
	for _, r := range results {
		status := "Complete"
		switch {
		case r.cancelledBy != nil:
			status = "Cancelled"
		case r.err != nil:
			status = "Failed"
			if mayFail(plan, r.platform) {
				status = "Failed (allowed)"
			}
		}
		digest := r.out.Pushed.Digest
		if digest == "" {
			digest = "-"
		}
		printf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.platform, status, digest,
			seconds(r.out.Build.Duration), seconds(r.out.Pushed.Duration), seconds(r.took))
	}
	_ = tw.Flush()
	for _, r := range results {
		switch {
		case r.cancelledBy != nil:
			printf(w, "%s: cancelled: %v\n", r.platform, r.cancelledBy)
		case r.err != nil:
			printf(w, "%s: %s: %v\n", r.platform, report.Reason(r.err), r.err)
		}
	}
	printf(w, "Total %s\n", took.Round(100*time.Millisecond))
}

func samePlatform(a, b string) bool {
	pa, errA := platform.Parse(a)
	pb, errB := platform.Parse(b)
	return errA == nil && errB == nil && pa.Equal(pb)
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// checkSecrets checks --secret values as buildah reads them, and that each
// file source is a readable file, so that a wrong one is refused before any
// build starts.
func checkSecrets(secrets []string) error {
	parsed, err := parse.Secrets(secrets)
	if err != nil {
		return fmt.Errorf("--secret: %w (give id=ID[,src=FILE|,env=VAR], naming a file that exists or a variable that is set)", err)
	}
	for id, sec := range parsed {
		if sec.SourceType != "file" {
			continue
		}
		info, err := os.Stat(sec.Source)
		if err != nil {
			return fmt.Errorf("--secret %s: %w", id, err)
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("--secret %s: %s is not a regular file", id, sec.Source)
		}
	}
	return nil
}
