package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

type startOptions struct {
	platforms []string
	allowFail []string
	env       []string
	commit    string
	fromDir   string
	follow    bool
	wait      bool
	output    string
}

func newStartBuild(o *env) *cobra.Command {
	so := &startOptions{}
	cmd := &cobra.Command{
		Use:   "start-build BUILDCONFIG",
		Short: "Start a build of a BuildConfig",
		Long: `Start a build of a BuildConfig, numbered after its status.lastVersion, as oc start-build does.

--platforms replaces the BuildConfig's platforms for this build (the BuildConfig's platformsAllowedToFail
then no longer apply; give --allow-fail). --follow shows each platform's phase as it changes and streams
the logs of every platform's pod, each line prefixed with its platform; --follow and --wait exit non-zero
when the build fails or is cancelled.`,
		Example: `  kubectl archway start-build hello --platforms linux/amd64,linux/arm64,linux/s390x --allow-fail linux/s390x --follow
  oc archway start-build hello --commit 9f1c2e9 --env RELEASE=1.4 -o name`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return so.run(cmd.Context(), o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&so.platforms, "platforms", nil, "platforms to build, replacing the BuildConfig's (e.g. linux/amd64,linux/arm64)")
	f.StringSliceVar(&so.allowFail, "allow-fail", nil, "platforms whose failure does not fail the build")
	f.StringArrayVarP(&so.env, "env", "e", nil, "environment variable of the build, K=V (repeatable)")
	f.StringVar(&so.commit, "commit", "", "source commit to build")
	f.StringVar(&so.fromDir, "from-dir", "", "build from a local directory (binary build; not supported yet)")
	f.BoolVarP(&so.follow, "follow", "F", false, "follow the build: per-platform progress and logs")
	f.BoolVarP(&so.wait, "wait", "w", false, "wait for the build to end")
	f.StringVarP(&so.output, "output", "o", "", "output format: json, yaml or name")
	return cmd
}

func (so *startOptions) request() (instantiate.Request, error) {
	req := instantiate.Request{
		TriggeredBy:            []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}},
		Platforms:              so.platforms,
		PlatformsAllowedToFail: so.allowFail,
	}
	for _, kv := range so.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, fmt.Errorf("--env %q: use NAME=VALUE", kv)
		}
		req.Env = append(req.Env, corev1.EnvVar{Name: k, Value: v})
	}
	if so.commit != "" {
		req.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: so.commit}}
	}
	return req, nil
}

func (so *startOptions) run(ctx context.Context, o *env, bcName string) error {
	if so.fromDir != "" {
		return errors.New("--from-dir: binary builds are not supported yet")
	}
	req, err := so.request()
	if err != nil {
		return err
	}
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	b, err := instantiate.NewStarter(c, nil).Start(ctx, ns, bcName, req)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return notFoundHelp(ctx, c, ns, bcName, err)
		}
		return err
	}
	b.SetGroupVersionKind(buildv1.GroupVersion.WithKind("Build"))
	if err := printObject(o.streams.Out, so.output, b, "build.build.openshift.io/"+b.Name+" started"); err != nil {
		return err
	}
	if !so.follow && !so.wait {
		return nil
	}
	f := &follower{c: c, cs: cs, ns: ns, name: b.Name, out: o.streams.Out, logs: so.follow, table: so.follow}
	final, err := f.run(ctx)
	if err != nil {
		return err
	}
	return endResult(final)
}

// endResult is nil for a Complete build, else an error naming the phase and
// reason, for a non-zero exit code.
func endResult(b *buildv1.Build) error {
	if b.Status.Phase == buildv1.BuildPhaseComplete {
		return nil
	}
	msg := fmt.Sprintf("build %s %s", b.Name, strings.ToLower(string(b.Status.Phase)))
	if b.Status.Reason != "" {
		msg += " (" + string(b.Status.Reason) + ")"
	}
	if b.Status.Message != "" {
		msg += ": " + b.Status.Message
	}
	return errors.New(msg)
}

// notFoundHelp turns "no such BuildConfig" into a message listing the
// BuildConfigs the namespace has.
func notFoundHelp(ctx context.Context, c client.Client, ns, name string, err error) error {
	var list buildv1.BuildConfigList
	if lerr := c.List(ctx, &list, client.InNamespace(ns)); lerr != nil {
		return err
	}
	var names []string
	for _, bc := range list.Items {
		names = append(names, bc.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Errorf("buildconfig %q not found: namespace %q has no BuildConfigs", name, ns)
	}
	return fmt.Errorf("buildconfig %q not found in namespace %q; its BuildConfigs: %s", name, ns, strings.Join(names, ", "))
}
