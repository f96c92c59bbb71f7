package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func newDescribe(o *env) *cobra.Command {
	return &cobra.Command{
		Use:     "describe build NAME",
		Short:   "Describe a build: summary, per-platform table and events",
		Example: "  kubectl archway describe build hello-3",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := args[0]
			if len(args) == 2 {
				if args[0] != "build" && args[0] != "builds" {
					return fmt.Errorf("describe: %q is not a kind this plugin describes: use describe build NAME", args[0])
				}
				arg = args[1]
			}
			name, err := buildName(arg)
			if err != nil {
				return err
			}
			return runDescribe(cmd.Context(), o, name)
		},
	}
}

func runDescribe(ctx context.Context, o *env, name string) error {
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
	pods, err := buildPods(ctx, cs, ns, name)
	if err != nil {
		return err
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("involvedObject.kind", "Build")).String()})
	if err != nil {
		return fmt.Errorf("listing the build's events: %w", err)
	}
	w := o.streams.Out
	describeBuild(w, b, pods)
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

// describeBuild writes the summary and the per-platform table, in the
// shape of oc describe build.
func describeBuild(w io.Writer, b *buildv1.Build, pods []buildPod) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			_, _ = fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("Name", b.Name)
	row("Namespace", b.Namespace)
	row("Created", b.CreationTimestamp.Format(time.RFC3339)+" ("+age(b.CreationTimestamp.Time)+" ago)")
	row("Labels", labelsString(b.Labels))
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
	row("Strategy", string(b.Spec.Strategy.Type))
	if g := b.Spec.Source.Git; g != nil {
		row("URL", g.URI)
		row("Ref", g.Ref)
	}
	if r := b.Spec.Revision; r != nil && r.Git != nil {
		row("Commit", shortCommit(r.Git.Commit)+" ("+firstLine(r.Git.Message)+")")
		if a := r.Git.Author; a.Name != "" {
			row("Author", strings.TrimSpace(a.Name+" <"+a.Email+">"))
		}
	}
	if b.Spec.Output.To != nil {
		row("Output to", b.Spec.Output.To.Name)
	}
	if b.Status.Output.To != nil {
		row("Image Digest", b.Status.Output.To.ImageDigest)
	}
	row("Platforms", strings.Join(b.Spec.Platforms, ", "))
	row("Allowed to fail", strings.Join(b.Spec.PlatformsAllowedToFail, ", "))
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
