package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

// cancellableStates are the phases of a build that has not ended, as
// oc cancel-build --state names them.
var cancellableStates = map[string]buildv1.BuildPhase{
	"new": buildv1.BuildPhaseNew, "pending": buildv1.BuildPhasePending, "running": buildv1.BuildPhaseRunning,
}

type cancelOptions struct {
	states   []string
	dumpLogs bool
	restart  bool
}

func newCancelBuild(o *env) *cobra.Command {
	co := &cancelOptions{}
	cmd := &cobra.Command{
		Use:   "cancel-build (NAME | build/NAME | bc/NAME)...",
		Short: "Cancel builds",
		Long: `Cancel builds by setting status.cancelled through the status subresource (stock oc cancel-build
writes it through the main resource, which a CRD with a status subresource ignores). The build
controller then stops the build's pods and ends it Cancelled.

bc/NAME cancels every build of the BuildConfig that has not ended; --state cancels only builds in these
states (new, pending, running), for named builds too. --dump-logs prints each cancelled build's logs;
--restart starts each one again (as start-build --from-build does).`,
		Example: `  kubectl archway cancel-build hello-3
  kubectl archway cancel-build bc/hello --state=new,pending
  kubectl archway cancel-build hello-3 --restart`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: o.completeNames(0, kindBuild, kindBuild, kindBuildConfig),
		RunE: func(cmd *cobra.Command, args []string) error {
			return co.run(cmd.Context(), o, args)
		},
	}
	cmd.Flags().StringSliceVar(&co.states, "state", nil, "only cancel builds in these states: new, pending, running (default: all three)")
	cmd.Flags().BoolVar(&co.dumpLogs, "dump-logs", false, "print the logs of each cancelled build")
	cmd.Flags().BoolVar(&co.restart, "restart", false, "start each cancelled build again, as its BuildConfig's next build")
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]cobra.Completion{"new", "pending", "running"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// phases reads --state.
func (co *cancelOptions) phases() ([]buildv1.BuildPhase, error) {
	var out []buildv1.BuildPhase
	for _, s := range co.states {
		p, ok := cancellableStates[strings.ToLower(strings.TrimSpace(s))]
		if !ok {
			return nil, fmt.Errorf("--state %q: use new, pending or running (a build in another state has ended)", s)
		}
		out = append(out, p)
	}
	return out, nil
}

func (co *cancelOptions) run(ctx context.Context, o *env, args []string) error {
	phases, err := co.phases()
	if err != nil {
		return err
	}
	type target struct {
		k    kind
		name string
	}
	var targets []target
	for _, a := range args {
		k, name, err := resourceArg(a, kindBuild, kindBuild, kindBuildConfig)
		if err != nil {
			return err
		}
		targets = append(targets, target{k, name})
	}
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range targets {
		var builds []buildv1.Build
		if t.k == kindBuildConfig {
			if builds, err = buildsOfConfig(ctx, c, ns, t.name); err != nil {
				errs = append(errs, err)
				continue
			}
		} else {
			b := &buildv1.Build{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.name}, b); err != nil {
				if apierrors.IsNotFound(err) {
					err = fmt.Errorf("build %q not found in namespace %q", t.name, ns)
				}
				errs = append(errs, err)
				continue
			}
			builds = []buildv1.Build{*b}
		}
		for i := range builds {
			errs = append(errs, co.cancel(ctx, o, c, cs, &builds[i], phases, t.k == kindBuildConfig))
		}
	}
	return errors.Join(errs...)
}

// cancel cancels b unless it has ended or is in none of phases (when
// given); quiet leaves out the line for a build skipped (bc/NAME goes
// through every build of the BuildConfig).
func (co *cancelOptions) cancel(ctx context.Context, o *env, c client.Client, cs kubernetes.Interface, b *buildv1.Build, phases []buildv1.BuildPhase, quiet bool) error {
	phase := b.Status.Phase
	if phase == "" {
		phase = buildv1.BuildPhaseNew
	}
	out := o.streams.Out
	switch {
	case phase.IsTerminal():
		if !quiet {
			_, _ = fmt.Fprintf(out, "build.build.openshift.io/%s already ended (%s)\n", b.Name, phase)
		}
		return nil
	case len(phases) > 0 && !slices.Contains(phases, phase):
		if !quiet {
			_, _ = fmt.Fprintf(out, "build.build.openshift.io/%s is %s, not cancelled (--state)\n", b.Name, phase)
		}
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"cancelled":true}}`))
	if err := c.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("cancelling build %s: %w", b.Name, err)
	}
	_, _ = fmt.Fprintf(out, "build.build.openshift.io/%s cancelled\n", b.Name)
	if co.dumpLogs {
		pods, err := buildPods(ctx, cs, b.Namespace, b.Name)
		if err != nil {
			return err
		}
		w := newLineWriter(out, false)
		for _, p := range pods {
			if !podStarted(&p.pod) {
				continue
			}
			if err := streamLogs(ctx, cs, &p.pod, &corev1.PodLogOptions{}, p.platform, w); err != nil {
				_, _ = fmt.Fprintf(o.streams.ErrOut, "logs of build %s: %v\n", b.Name, err)
			}
		}
	}
	if co.restart {
		nb, err := instantiate.NewStarter(c, nil).Clone(ctx, b.Namespace, b.Name, instantiate.Request{
			TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}},
		})
		if err != nil {
			return fmt.Errorf("restarting build %s: %w", b.Name, err)
		}
		_, _ = fmt.Fprintf(out, "build.build.openshift.io/%s restarted as build.build.openshift.io/%s\n", b.Name, nb.Name)
	}
	return nil
}

// buildsOfConfig lists BuildConfig bc's builds in number order; a missing
// BuildConfig is an error listing those there are.
func buildsOfConfig(ctx context.Context, c client.Client, ns, bc string) ([]buildv1.Build, error) {
	if _, err := getBuildConfig(ctx, c, ns, bc); err != nil {
		return nil, err
	}
	var list buildv1.BuildList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{buildv1.BuildConfigLabel: buildv1.LabelValue(bc)}); err != nil {
		return nil, fmt.Errorf("listing the builds of buildconfig %s: %w", bc, err)
	}
	var out []buildv1.Build
	for _, b := range list.Items {
		if b.Annotations[buildv1.BuildConfigAnnotation] == bc {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b buildv1.Build) int { return cmp.Compare(buildNumber(&a), buildNumber(&b)) })
	return out, nil
}

// buildNumber is a build's number among its BuildConfig's (0 when it has
// none).
func buildNumber(b *buildv1.Build) int64 {
	n, _ := strconv.ParseInt(b.Annotations[buildv1.BuildNumberAnnotation], 10, 64)
	return n
}
