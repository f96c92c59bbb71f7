package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

type logsOptions struct {
	platforms  []string
	follow     bool
	version    int64
	tail       int64
	since      time.Duration
	sinceTime  string
	timestamps bool
	limitBytes int64
	// ignoreErrors reports a pod whose log cannot be read and goes on,
	// exiting 0, as kubectl logs --ignore-errors does.
	ignoreErrors bool
}

func newLogs(o *env) *cobra.Command {
	lo := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs (build/NAME | bc/NAME | NAME)",
		Short: "Print the logs of a build's pods, per platform",
		Long: `Print the logs of a build: every platform's pod, then the manifest-list pod. With more than one
pod each line starts with its platform ("[linux/arm64] ..."); --platform picks some. bc/NAME is the
BuildConfig's latest build (--version N: its build number N), as oc logs bc/NAME. With -f on a build that has
not ended, it streams each pod's log from when the pod starts until the build ends.

--tail, --since, --since-time, --timestamps and --limit-bytes apply to each pod's log, as in kubectl logs.
A pod whose log cannot be read ends the command with an error once the other pods' logs are printed
(while following a running build, it is reported as a line); --ignore-errors reports it on stderr and
exits 0.`,
		Example: `  kubectl archway logs build/hello-3 -f
  kubectl archway logs bc/hello --platform linux/arm64 --tail 20 --timestamps
  kubectl archway logs bc/hello --version 2 --since 10m`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(1, kindBuild, kindBuild, kindBuildConfig),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lo.run(cmd, o, args[0])
		},
	}
	f := cmd.Flags()
	addPlatformFlag(cmd, &lo.platforms, "only these platforms' pods (e.g. linux/arm64), or manifest-list")
	f.BoolVarP(&lo.follow, "follow", "f", false, "stream the logs until the build ends")
	f.Int64Var(&lo.version, "version", 0, "with bc/NAME: the logs of the BuildConfig's build number N instead of its latest")
	f.Int64Var(&lo.tail, "tail", -1, "lines of each pod's log to show, from its end (-1: all)")
	f.DurationVar(&lo.since, "since", 0, "only lines newer than this, e.g. 5s, 2m or 3h (default: all)")
	f.StringVar(&lo.sinceTime, "since-time", "", "only lines since this time (RFC3339), e.g. 2026-05-01T10:00:00Z")
	f.BoolVar(&lo.timestamps, "timestamps", false, "start each line with its time (RFC3339)")
	f.Int64Var(&lo.limitBytes, "limit-bytes", 0, "bytes of each pod's log to show at most (0: no limit)")
	f.BoolVar(&lo.ignoreErrors, "ignore-errors", false, "report a pod whose log cannot be read on stderr and exit 0")
	return cmd
}

// podLogOptions checks the flags (as kubectl logs does) and turns them
// into the options of each pod's log.
func (lo *logsOptions) podLogOptions(cmd *cobra.Command) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{Timestamps: lo.timestamps}
	if lo.tail < -1 {
		return nil, fmt.Errorf("--tail %d: give -1 (all lines) or a count of 0 or more", lo.tail)
	}
	if lo.tail >= 0 {
		opts.TailLines = &lo.tail
	}
	if lo.limitBytes < 0 {
		return nil, fmt.Errorf("--limit-bytes %d: give 0 (no limit) or more", lo.limitBytes)
	}
	if lo.limitBytes > 0 {
		opts.LimitBytes = &lo.limitBytes
	}
	if cmd.Flags().Changed("since") && lo.sinceTime != "" {
		return nil, errors.New("give one of --since and --since-time")
	}
	if cmd.Flags().Changed("since") {
		if lo.since <= 0 {
			return nil, fmt.Errorf("--since %s: give a duration above zero, e.g. 10m", lo.since)
		}
		secs := int64((lo.since + time.Second - 1) / time.Second)
		opts.SinceSeconds = &secs
	}
	if lo.sinceTime != "" {
		t, err := time.Parse(time.RFC3339, lo.sinceTime)
		if err != nil {
			return nil, fmt.Errorf("--since-time %q: give an RFC3339 time, e.g. 2026-05-01T10:00:00Z", lo.sinceTime)
		}
		opts.SinceTime = &metav1.Time{Time: t}
	}
	for _, p := range lo.platforms {
		if p == manifestListLabel {
			continue
		}
		if _, err := platform.Parse(p); err != nil {
			return nil, fmt.Errorf("--platform %s: %w", p, err)
		}
	}
	return opts, nil
}

func (lo *logsOptions) run(cmd *cobra.Command, o *env, arg string) error {
	ctx := cmd.Context()
	k, name, err := resourceArg(arg, kindBuild, kindBuild, kindBuildConfig)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("version") && k != kindBuildConfig {
		return errors.New("--version picks a build of a BuildConfig: give bc/NAME")
	}
	opts, err := lo.podLogOptions(cmd)
	if err != nil {
		return err
	}
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	if k == kindBuildConfig {
		if name, err = buildOfConfig(ctx, c, ns, name, lo.version); err != nil {
			return err
		}
	}
	b := &buildv1.Build{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("build %q not found in namespace %q", name, ns)
		}
		return err
	}
	if lo.follow && !b.Status.Phase.IsTerminal() {
		// A running build: its logs until it ends, each pod's from when it
		// starts (platforms still pending, the manifest-list pod).
		f := &follower{c: c, cs: cs, ns: ns, name: name, out: o.streams.Out, logs: true, only: lo.platforms, logOptions: *opts}
		_, err := f.run(ctx)
		return err
	}
	pods, err := buildPods(ctx, cs, ns, name)
	if err != nil {
		return err
	}
	if len(lo.platforms) > 0 {
		if pods, err = podsOfPlatforms(pods, lo.platforms); err != nil {
			return err
		}
	}
	var started []buildPod
	for _, p := range pods {
		if podStarted(&p.pod) {
			started = append(started, p)
		}
	}
	if len(started) == 0 {
		return fmt.Errorf("build %s has no pod with logs yet (phase %s)", name, phaseOf(b))
	}
	w := newLineWriter(o.streams.Out, false)
	multi := len(pods) > 1
	prefix := func(p buildPod) string {
		if multi {
			return p.platform
		}
		return ""
	}
	errs := make([]error, len(started))
	if !lo.follow {
		for i, p := range started {
			errs[i] = streamLogs(ctx, cs, &p.pod, opts, prefix(p), w)
		}
	} else {
		opts.Follow = true
		var wg sync.WaitGroup
		for i, p := range started {
			wg.Go(func() { errs[i] = streamLogs(ctx, cs, &p.pod, opts, prefix(p), w) })
		}
		wg.Wait()
	}
	err = errors.Join(errs...)
	if err != nil && lo.ignoreErrors {
		_, _ = fmt.Fprintf(o.streams.ErrOut, "error: %v\n", err)
		return nil
	}
	return err
}

// buildOfConfig names BuildConfig bc's build number version, or its latest
// (version 0): the one of the highest number.
func buildOfConfig(ctx context.Context, c client.Client, ns, bc string, version int64) (string, error) {
	builds, err := buildsOfConfig(ctx, c, ns, bc)
	if err != nil {
		return "", err
	}
	if len(builds) == 0 {
		return "", fmt.Errorf("buildconfig %s has no builds", bc)
	}
	if version == 0 {
		return builds[len(builds)-1].Name, nil
	}
	var have []string
	for i := range builds {
		n := buildNumber(&builds[i])
		if n == version {
			return builds[i].Name, nil
		}
		have = append(have, strconv.FormatInt(n, 10))
	}
	return "", fmt.Errorf("buildconfig %s has no build number %d; its builds are numbered %s", bc, version, strings.Join(have, ", "))
}

// podsOfPlatforms keeps the pods of the platforms asked for (compared
// normalized, linux/arm64 = linux/arm64/v8), or the manifest-list pod.
func podsOfPlatforms(pods []buildPod, want []string) ([]buildPod, error) {
	var out []buildPod
	var have []string
	for _, p := range pods {
		have = append(have, p.platform)
	}
	for _, w := range want {
		found := false
		for _, p := range pods {
			if p.platform == w || samePlatform(p.platform, w) {
				if !slices.ContainsFunc(out, func(o buildPod) bool { return o.pod.Name == p.pod.Name }) {
					out = append(out, p)
				}
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--platform %s: the build has no pod for it; its pods are for: %v", w, have)
		}
	}
	return out, nil
}

func samePlatform(a, b string) bool {
	pa, err := platform.Parse(a)
	if err != nil {
		return false
	}
	pb, err := platform.Parse(b)
	return err == nil && pa.Equal(pb)
}
