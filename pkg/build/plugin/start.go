package plugin

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
	binary    binaryInput
	endpoint  endpoint
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
when the build fails or is cancelled.

--from-dir, --from-file and --from-archive start a binary build: the input is uploaded once to
build-controller's endpoint (--build-endpoint), authenticated with your kubeconfig's bearer token and
authorized for create on buildconfigs/instantiatebinary; build-controller stores it in the output
repository and every platform's build reads it from there.`,
		Example: `  kubectl archway start-build hello --platforms linux/amd64,linux/arm64,linux/s390x --allow-fail linux/s390x --follow
  oc archway start-build hello --commit 9f1c2e9 --env RELEASE=1.4 -o name
  kubectl archway start-build hello --from-dir . --build-endpoint https://builds.example.com --follow`,
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
	f.StringVar(&so.binary.dir, "from-dir", "", "binary build: upload this directory (as a gzipped tar) as the build's source")
	f.StringVar(&so.binary.file, "from-file", "", "binary build: upload this file as the build's only source file")
	f.StringVar(&so.binary.archive, "from-archive", "", "binary build: upload this archive (tar, tar.gz, tar.bz2 or zip) as the build's source")
	f.StringVar(&so.endpoint.url, "build-endpoint", "", "binary builds: build-controller's HTTPS endpoint (default $"+EndpointEnv+")")
	f.StringVar(&so.endpoint.caFile, "build-endpoint-ca", "", "binary builds: CA file to trust the endpoint with (default $"+EndpointCAEnv+", else the system's)")
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
	if err := so.binary.check(); err != nil {
		return err
	}
	req, err := so.request()
	if err != nil {
		return err
	}
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	var b *buildv1.Build
	if so.binary.set() {
		cfg, cerr := o.flags.ToRESTConfig()
		if cerr != nil {
			return cerr
		}
		b, err = startBinary(ctx, cfg, so.endpoint, ns, bcName, so.binary, req)
	} else {
		b, err = so.start(ctx, c, ns, bcName, req)
	}
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

// start starts a build without a binary input; a BuildConfig with a
// binary source needs one.
func (so *startOptions) start(ctx context.Context, c client.Client, ns, bcName string, req instantiate.Request) (*buildv1.Build, error) {
	bc := &buildv1.BuildConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: bcName}, bc); err != nil {
		return nil, err
	}
	if bc.Spec.Source.Type == buildv1.BuildSourceBinary || (bc.Spec.Source.Type == "" && bc.Spec.Source.Binary != nil) {
		return nil, fmt.Errorf("buildconfig %q has a binary source: give --from-dir, --from-file or --from-archive", bcName)
	}
	return instantiate.NewStarter(c, nil).Start(ctx, ns, bcName, req)
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
