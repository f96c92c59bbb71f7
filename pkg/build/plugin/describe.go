package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// describeOptions are describe's flags.
type describeOptions struct {
	endpointURL string
	selector    string
	showEvents  bool
}

func newDescribe(o *env) *cobra.Command {
	do := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe (build | bc) (NAME | -l SELECTOR)",
		Short: "Describe a build (summary, per-platform table, events) or a BuildConfig (with its webhook URLs and builds)",
		Long: `Describe a build: its summary, per-platform table and events; or a BuildConfig, as oc describe bc:
its source, strategy, platforms, run policy, triggers with their webhook URLs (the secret shown as <secret>),
history limits, builds and events. Webhook URLs are on the cluster's API address (your kubeconfig's server),
which passes deliveries to build-triggers; with --build-endpoint (or $` + EndpointEnv + `) they are on
build-triggers' Service as you expose it instead.

-l describes every build (or BuildConfig) of the namespace whose labels match the selector, as kubectl
describe -l does, in name order; --show-events=false leaves the events out.`,
		Example: `  kubectl archway describe build hello-3
  kubectl archway describe bc/hello
  kubectl archway describe bc/hello --build-endpoint https://builds.example.com
  kubectl archway describe build -l openshift.io/build-config.name=hello --show-events=false`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: o.completeDescribe,
		RunE: func(cmd *cobra.Command, args []string) error {
			return do.run(cmd.Context(), o, args)
		},
	}
	cmd.Flags().StringVar(&do.endpointURL, "build-endpoint", "", "BuildConfigs: build-triggers' Service as exposed, for webhook URLs that bypass the apiserver (default $"+EndpointEnv+", else the cluster's API address)")
	cmd.Flags().StringVarP(&do.selector, "selector", "l", "", "describe every object of the kind whose labels match this selector (e.g. key1=value1,key2=value2) instead of one NAME")
	cmd.Flags().BoolVar(&do.showEvents, "show-events", true, "print the events of each object described")
	return cmd
}

func (do *describeOptions) run(ctx context.Context, o *env, args []string) error {
	if do.selector != "" {
		return do.runSelected(ctx, o, args)
	}
	arg := args[0]
	if len(args) == 2 {
		if strings.Contains(args[0], "/") {
			return fmt.Errorf("describe: give KIND NAME or KIND/NAME, not %q", strings.Join(args, " "))
		}
		arg = args[0] + "/" + args[1]
	}
	k, name, err := resourceArg(arg, kindBuild, kindBuild, kindBuildConfig)
	if err != nil {
		return err
	}
	return do.describe(ctx, o, k, name)
}

// describe describes one build or BuildConfig.
func (do *describeOptions) describe(ctx context.Context, o *env, k kind, name string) error {
	if k == kindBuildConfig {
		base, err := o.webhookBase(do.endpointURL)
		if err != nil {
			return err
		}
		return runDescribeConfig(ctx, o, name, base, do.showEvents)
	}
	return runDescribe(ctx, o, name, do.showEvents)
}

// runSelected describes every object of the kind args names whose labels
// match --selector, each after a blank line as kubectl separates them.
func (do *describeOptions) runSelected(ctx context.Context, o *env, args []string) error {
	k, ok := kindSpellings[strings.ToLower(args[0])]
	if len(args) != 1 || !ok {
		return fmt.Errorf("describe -l: give only the kind (build or bc), not %q", strings.Join(args, " "))
	}
	sel, err := labels.Parse(do.selector)
	if err != nil {
		return fmt.Errorf("--selector %q: %w", do.selector, err)
	}
	c, _, ns, err := o.clients()
	if err != nil {
		return err
	}
	var names []string
	if k == kindBuildConfig {
		var list buildv1.BuildConfigList
		err = c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
		for _, bc := range list.Items {
			names = append(names, bc.Name)
		}
	} else {
		var list buildv1.BuildList
		err = c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
		for _, b := range list.Items {
			names = append(names, b.Name)
		}
	}
	if err != nil {
		return fmt.Errorf("listing the %ss matching %q: %w", k, do.selector, err)
	}
	if len(names) == 0 {
		_, _ = fmt.Fprintf(o.streams.ErrOut, "No resources found in %s namespace.\n", ns)
		return nil
	}
	slices.Sort(names)
	for i, name := range names {
		if i > 0 {
			_, _ = fmt.Fprint(o.streams.Out, "\n\n")
		}
		if err := do.describe(ctx, o, k, name); err != nil {
			return err
		}
	}
	return nil
}

// completeDescribe completes KIND, then NAME, or KIND/NAME.
func (o *env) completeDescribe(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		if strings.Contains(toComplete, "/") {
			return o.completeNames(1, kindBuild, kindBuild, kindBuildConfig)(cmd, args, toComplete)
		}
		var out []cobra.Completion
		for _, k := range []string{"build", "bc", "buildconfig"} {
			if strings.HasPrefix(k, toComplete) {
				out = append(out, k)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	case 1:
		if k, ok := kindSpellings[strings.ToLower(args[0])]; ok {
			return o.completeNames(0, k, k)(cmd, nil, toComplete)
		}
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

func runDescribe(ctx context.Context, o *env, name string, events bool) error {
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	b := &buildv1.Build{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("build %q not found in namespace %q", name, ns)
		}
		return err
	}
	if err := withMultiArchBuild(ctx, c, b); err != nil {
		return err
	}
	pods, err := buildPods(ctx, cs, ns, name)
	if err != nil {
		return err
	}
	w := o.streams.Out
	describeBuild(w, b, pods)
	if !events {
		return nil
	}
	return describeEvents(ctx, w, cs, ns, "Build", name)
}

// runDescribeConfig describes a BuildConfig, as oc describe bc does, with
// its webhook URLs at base.
func runDescribeConfig(ctx context.Context, o *env, name string, base webhookBase, events bool) error {
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	bc, err := getBuildConfig(ctx, c, ns, name)
	if err != nil {
		return err
	}
	builds, err := buildsOfConfig(ctx, c, ns, name)
	if err != nil {
		return err
	}
	w := o.streams.Out
	describeConfig(w, bc, builds, base)
	if !events {
		return nil
	}
	return describeEvents(ctx, w, cs, ns, "BuildConfig", name)
}

// describeEvents writes the events of an object, oldest first.
func describeEvents(ctx context.Context, w io.Writer, cs kubernetes.Interface, ns, kind, name string) error {
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("involvedObject.kind", kind)).String()})
	if err != nil {
		return fmt.Errorf("listing the %s's events: %w", strings.ToLower(kind), err)
	}
	_, _ = fmt.Fprintln(w, "\nEvents:")
	if len(events.Items) == 0 {
		_, _ = fmt.Fprintln(w, "  <none>")
		return nil
	}
	items := events.Items
	slices.SortFunc(items, func(a, b corev1Event) int { return eventTime(a).Compare(eventTime(b)) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tFROM\tMESSAGE")
	for _, e := range items {
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age(eventTime(e)), from, strings.TrimSpace(e.Message))
	}
	return tw.Flush()
}

// describeConfig writes a BuildConfig in the shape of oc describe bc.
func describeConfig(w io.Writer, bc *buildv1.BuildConfig, builds []buildv1.Build, base webhookBase) {
	tw, row := rowWriter(w)
	describeMeta(row, bc)
	row("Annotations", dashNone(labelsString(bc.Annotations)))
	row("Latest Version", strconv.FormatInt(bc.Status.LastVersion, 10))
	_, _ = fmt.Fprintln(tw)
	describeCommon(row, &bc.Spec.CommonSpec)
	_, _ = fmt.Fprintln(tw)
	policy := bc.Spec.RunPolicy
	if policy == "" {
		policy = buildv1.BuildRunPolicySerial
	}
	row("Build Run Policy", string(policy))
	var triggers []string
	for _, t := range bc.Spec.Triggers {
		name := string(t.Type)
		if t.Type == buildv1.ConfigChangeBuildTriggerType {
			name = "Config"
		}
		triggers = append(triggers, name)
	}
	row("Triggered by", dashNone(strings.Join(triggers, ", ")))
	for _, h := range webhooksOf(bc, base) {
		_, _ = fmt.Fprintf(tw, "Webhook %s:\n", webhookTitle(h.typ))
		_, _ = fmt.Fprintf(tw, "\tURL:\t%s\n", h.url)
		if h.typ == "generic" {
			_, _ = fmt.Fprintf(tw, "\tAllowEnv:\t%v\n", h.allowEnv)
		}
	}
	_, _ = fmt.Fprintln(tw, "Builds History Limit:")
	_, _ = fmt.Fprintf(tw, "\tSuccessful:\t%s\n", limitString(bc.Spec.SuccessfulBuildsHistoryLimit))
	_, _ = fmt.Fprintf(tw, "\tFailed:\t%s\n", limitString(bc.Spec.FailedBuildsHistoryLimit))
	_ = tw.Flush()
	_, _ = fmt.Fprintln(w)
	if len(builds) == 0 {
		_, _ = fmt.Fprintln(w, "Builds:\t<none>")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "Build\tStatus\tPlatforms\tDuration\tCreation Time")
	for i := len(builds) - 1; i >= 0; i-- {
		b := &builds[i]
		status := strings.ToLower(string(b.Status.Phase))
		if status == "" {
			status = "new"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.Name, status, dash(b.Status.PlatformsSummary),
			dash(duration(b.Status.StartTimestamp, b.Status.CompletionTimestamp)), b.CreationTimestamp.Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// rowWriter writes "Key:  value" rows, aligned once flushed; a row with
// no value is left out.
func rowWriter(w io.Writer) (*tabwriter.Writer, func(k, v string)) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	return tw, func(k, v string) {
		if v != "" {
			_, _ = fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
}

// describeMeta writes the rows of an object's metadata.
func describeMeta(row func(k, v string), obj metav1.Object) {
	row("Name", obj.GetName())
	row("Namespace", obj.GetNamespace())
	created := obj.GetCreationTimestamp()
	row("Created", created.Format(time.RFC3339)+" ("+age(created.Time)+" ago)")
	row("Labels", dashNone(labelsString(obj.GetLabels())))
}

// describeCommon writes the rows a Build and its BuildConfig share: the
// strategy, source, output and platforms.
func describeCommon(row func(k, v string), spec *buildv1.CommonSpec) {
	row("Strategy", string(spec.Strategy.Type))
	if g := spec.Source.Git; g != nil {
		row("URL", g.URI)
		row("Ref", g.Ref)
	}
	if spec.Source.Type == buildv1.BuildSourceBinary {
		row("Source", "Binary")
	}
	row("Context Dir", spec.Source.ContextDir)
	if ds := spec.Strategy.DockerStrategy; ds != nil {
		if ds.From != nil {
			row("From Image", ds.From.Kind+" "+ds.From.Name)
		}
		row("Dockerfile Path", ds.DockerfilePath)
		var args []string
		for _, a := range ds.BuildArgs {
			args = append(args, a.Name+"="+a.Value)
		}
		row("Build Args", strings.Join(args, ", "))
		if ds.NoCache {
			row("No Cache", "true")
		}
	}
	if ss := spec.Strategy.SourceStrategy; ss != nil {
		row("Builder Image", ss.From.Kind+" "+ss.From.Name)
		row("Scripts", ss.Scripts)
		if ss.Incremental != nil && *ss.Incremental {
			row("Incremental", "true")
		}
	}
	if to := spec.Output.To; to != nil {
		row("Output to", to.Kind+" "+to.Name)
	}
	row("Platforms", strings.Join(spec.Platforms, ", "))
	row("Allowed to fail", strings.Join(spec.PlatformsAllowedToFail, ", "))
}

func webhookTitle(typ string) string {
	switch typ {
	case "github":
		return "GitHub"
	case "gitlab":
		return "GitLab"
	}
	return strings.ToUpper(typ[:1]) + typ[1:]
}

func limitString(l *int32) string {
	if l == nil {
		return "<unset>"
	}
	return strconv.Itoa(int(*l))
}

func dashNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// describeBuild writes the summary and the per-platform table, in the
// shape of oc describe build.
func describeBuild(w io.Writer, b *buildv1.Build, pods []buildPod) {
	tw, row := rowWriter(w)
	describeMeta(row, b)
	row("Build Config", b.Annotations[buildv1.BuildConfigAnnotation])
	row("Build #", b.Annotations[buildv1.BuildNumberAnnotation])
	_, _ = fmt.Fprintln(tw)
	status := string(b.Status.Phase)
	if status == "" {
		status = string(buildv1.BuildPhaseNew)
	}
	if b.Status.Reason != "" {
		status += " (" + string(b.Status.Reason) + ")"
	}
	row("Status", status)
	row("Platforms complete", b.Status.PlatformsSummary)
	row("Message", b.Status.Message)
	if b.Status.StartTimestamp != nil {
		row("Started", b.Status.StartTimestamp.Format(time.RFC3339))
	}
	row("Duration", duration(b.Status.StartTimestamp, b.Status.CompletionTimestamp))
	_, _ = fmt.Fprintln(tw)
	describeCommon(row, &b.Spec.CommonSpec)
	if r := b.Spec.Revision; r != nil && r.Git != nil {
		commit := shortCommit(r.Git.Commit)
		if m := firstLine(r.Git.Message); m != "" {
			commit += " (" + m + ")"
		}
		row("Commit", commit)
		if a := r.Git.Author; a.Name != "" {
			row("Author", strings.TrimSpace(a.Name+" <"+a.Email+">"))
		}
	}
	if b.Status.Output.To != nil {
		row("Image Digest", b.Status.Output.To.ImageDigest)
	}
	var causes []string
	for _, c := range b.Spec.TriggeredBy {
		causes = append(causes, c.Message)
	}
	row("Triggered by", strings.Join(causes, ", "))
	var names []string
	for _, p := range pods {
		names = append(names, p.pod.Name)
	}
	row("Build Pods", strings.Join(names, ", "))
	_ = tw.Flush()
	if len(b.Status.Platforms) > 0 {
		_, _ = fmt.Fprintln(w, "\nPlatforms:")
		for _, line := range strings.Split(strings.TrimRight(platformTable(b, pods, true), "\n"), "\n") {
			_, _ = fmt.Fprintln(w, "  "+line)
		}
	}
}

func labelsString(l map[string]string) string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// duration is end-start (now-start while running), or "".
func duration(start, end *metav1.Time) string {
	if start == nil {
		return ""
	}
	until := time.Now()
	if end != nil {
		until = end.Time
	}
	return until.Sub(start.Time).Round(time.Second).String()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return time.Since(t).Round(time.Second).String()
}

// withMultiArchBuild fills in the per-platform status of an OpenShift
// Custom-strategy Build that archway's custom builder ran: OpenShift's Build
// has no field for it, so it is in the MultiArchBuild of the Build's name
// (pkg/build/custom).
func withMultiArchBuild(ctx context.Context, c client.Client, b *buildv1.Build) error {
	if b.Spec.Strategy.Type != "Custom" {
		return nil
	}
	mab := &archwaybuildv1alpha1.MultiArchBuild{}
	err := c.Get(ctx, client.ObjectKeyFromObject(b), mab)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the per-platform status of build %s (multiarchbuild): %w", b.Name, err)
	}
	b.Status.Platforms, b.Status.PlatformsSummary = mab.Status.Platforms, mab.Status.PlatformsSummary
	if b.Status.Output.To == nil {
		b.Status.Output = mab.Status.Output
	}
	return nil
}
