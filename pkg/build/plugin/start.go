package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

type startOptions struct {
	platforms    []string
	allowFail    []string
	env          []string
	buildArgs    []string
	noCache      bool
	incremental  bool
	commit       string
	fromBuild    string
	listWebhooks string
	binary       binaryInput
	endpoint     endpoint
	follow       bool
	wait         bool
	print        *printFlags
	// buildLogLevel is --build-loglevel, given to the build as
	// BUILD_LOGLEVEL, which the builder reads as OpenShift's does.
	buildLogLevel string
}

// buildLogLevelEnv is the build's env variable of the builder's log level
// (oc start-build --build-loglevel sets the same).
const buildLogLevelEnv = "BUILD_LOGLEVEL"

func newStartBuild(o *env) *cobra.Command {
	so := &startOptions{print: newPrintFlags("started", o.scheme)}
	cmd := &cobra.Command{
		Use:   "start-build (BUILDCONFIG | --from-build=BUILD)",
		Short: "Start a build of a BuildConfig, or run a build again",
		Long: `Start a build of a BuildConfig, numbered after its status.lastVersion, as oc start-build does;
--from-build runs an earlier build again: its source, revision, strategy and platforms (not the
BuildConfig's current ones), as the BuildConfig's next build.

--platform replaces the BuildConfig's platforms for this build (the BuildConfig's platformsAllowedToFail
then no longer apply; give --allow-fail). --env, --build-arg and --no-cache change the build's
environment, Dockerfile ARGs and noCache; --incremental a Source build's incremental. --follow shows each platform's phase as it changes (redrawn in
place on a terminal) and streams the logs of every platform's pod, each line prefixed with its platform;
--follow and --wait exit non-zero when the build fails or is cancelled.

--from-dir, --from-file, --from-archive and --from-repo start a binary build: the input is uploaded once,
through the apiserver with your kubeconfig's credentials (any kind kubectl uses) to build-triggers (the
aggregated API triggers.archway.dev), authorized for create on buildconfigs/instantiatebinary;
build-triggers stores it in the output repository and every platform's build reads it from there.
--build-endpoint uploads straight to build-triggers' Service instead, with your bearer token: for uploads
longer than the apiserver's request timeout (60s by default). --from-dir leaves out .git and what the build
context's .dockerignore excludes; --from-repo uploads the files of a commit (--commit, default HEAD) of a
local Git repository and records the commit, its author and message in the build.

-o is checked before anything starts.`,
		Example: `  kubectl archway start-build hello --platform linux/amd64,linux/arm64,linux/s390x --allow-fail linux/s390x --follow
  kubectl archway start-build hello --commit 9f1c2e9 --env RELEASE=1.4 --build-arg GO_VERSION=1.26 --no-cache -o name
  kubectl archway start-build --from-build hello-3 --follow
  kubectl archway start-build hello --from-dir . --follow
  kubectl archway start-build hello --from-repo . --commit v1.2.0 --follow
  kubectl archway start-build hello --from-archive big.tar.gz --build-endpoint https://builds.example.com  # longer than the apiserver's request timeout
  kubectl archway start-build hello -o jsonpath='{.metadata.name}'`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeNames(1, kindBuildConfig, kindBuildConfig),
		RunE: func(cmd *cobra.Command, args []string) error {
			return so.run(cmd, o, args)
		},
	}
	f := cmd.Flags()
	addPlatformFlag(cmd, &so.platforms, "platforms to build, replacing the BuildConfig's (e.g. linux/amd64,linux/arm64)")
	f.StringSliceVar(&so.allowFail, "allow-fail", nil, "platforms whose failure does not fail the build")
	f.StringArrayVarP(&so.env, "env", "e", nil, "environment variable of the build, NAME=VALUE (repeatable)")
	f.StringVar(&so.buildLogLevel, "build-loglevel", "", "the builder's log level, as the build's "+buildLogLevelEnv+": 2 to 4 add buildah's informational lines, 5 its debug lines")
	f.StringArrayVar(&so.buildArgs, "build-arg", nil, "Dockerfile ARG of the build, NAME=VALUE (repeatable), replacing the BuildConfig's of that name")
	f.BoolVar(&so.noCache, "no-cache", false, "run every step, reusing no cached layer (--no-cache=false overrides a BuildConfig's noCache)")
	f.BoolVar(&so.incremental, "incremental", false, "Source builds: restore the previous image's artifacts before assemble (--incremental=false overrides a BuildConfig's incremental)")
	f.StringVar(&so.commit, "commit", "", "source commit to build; with --from-repo, the commit to upload (default HEAD)")
	f.StringVar(&so.fromBuild, "from-build", "", "run this build again (NAME or build/NAME), as its BuildConfig's next build")
	f.StringVar(&so.listWebhooks, "list-webhooks", "", "print the BuildConfig's webhook URLs instead of starting a build: all, github, gitlab, bitbucket or generic")
	f.StringVar(&so.binary.dir, "from-dir", "", "binary build: upload this directory (without .git and what .dockerignore excludes) as the build's source")
	f.StringVar(&so.binary.file, "from-file", "", "binary build: upload this file as the build's only source file")
	f.StringVar(&so.binary.archive, "from-archive", "", "binary build: upload this archive (tar, tar.gz, tar.bz2 or zip) as the build's source")
	f.StringVar(&so.binary.repo, "from-repo", "", "binary build: upload the files of --commit (default HEAD) of this local Git repository")
	f.StringVar(&so.binary.exclude, "exclude", "", "with --from-dir: a regular expression of the paths (relative to the directory) to leave out, besides .git and what .dockerignore excludes")
	f.StringVar(&so.endpoint.url, "build-endpoint", "", "binary builds and webhook URLs: build-triggers' Service as exposed (HTTPS), instead of the apiserver (default $"+EndpointEnv+")")
	f.StringVar(&so.endpoint.caFile, "build-endpoint-ca", "", "with --build-endpoint: CA file to trust it with (default $"+EndpointCAEnv+", else the system's)")
	f.BoolVarP(&so.follow, "follow", "F", false, "follow the build: per-platform progress and logs")
	f.BoolVarP(&so.wait, "wait", "w", false, "wait for the build to end")
	so.print.addFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("from-build", o.completeNames(0, kindBuild, kindBuild))
	_ = cmd.RegisterFlagCompletionFunc("list-webhooks", cobra.FixedCompletions([]cobra.Completion{"all", "github", "gitlab", "bitbucket", "generic"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// request checks the flags and makes the request; nothing is read or
// started before it passes.
func (so *startOptions) request(cmd *cobra.Command) (instantiate.Request, error) {
	req := instantiate.Request{
		TriggeredBy:            []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}},
		Platforms:              so.platforms,
		PlatformsAllowedToFail: so.allowFail,
	}
	if err := checkPlatforms("platform", so.platforms); err != nil {
		return req, err
	}
	if err := checkPlatforms("allow-fail", so.allowFail); err != nil {
		return req, err
	}
	var err error
	if req.Env, err = envVars("env", so.env); err != nil {
		return req, err
	}
	if so.buildLogLevel != "" {
		if n, err := strconv.Atoi(so.buildLogLevel); err != nil || n < 0 {
			return req, fmt.Errorf("--build-loglevel %q: give a level of 0 or more (5: the builder's debug lines)", so.buildLogLevel)
		}
		if slices.ContainsFunc(req.Env, func(e corev1.EnvVar) bool { return e.Name == buildLogLevelEnv }) {
			return req, fmt.Errorf("--build-loglevel and --env %s=... both set the log level: give one", buildLogLevelEnv)
		}
		req.Env = append(req.Env, corev1.EnvVar{Name: buildLogLevelEnv, Value: so.buildLogLevel})
	}
	if req.BuildArgs, err = envVars("build-arg", so.buildArgs); err != nil {
		return req, err
	}
	if cmd.Flags().Changed("no-cache") {
		req.NoCache = ptr.To(so.noCache)
	}
	if cmd.Flags().Changed("incremental") {
		req.Incremental = ptr.To(so.incremental)
	}
	if so.commit != "" {
		if strings.HasPrefix(so.commit, "-") || strings.ContainsAny(so.commit, " \t\n") {
			return req, fmt.Errorf("--commit %q is not a commit, branch or tag name", so.commit)
		}
		if so.binary.repo == "" {
			req.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: so.commit}}
		}
	}
	return req, nil
}

// check refuses contradicting flags.
func (so *startOptions) check(args []string) error {
	if err := so.binary.check(); err != nil {
		return err
	}
	switch {
	case so.fromBuild != "" && len(args) > 0:
		return errors.New("give a BuildConfig or --from-build, not both")
	case so.fromBuild == "" && len(args) == 0:
		return errors.New("give the BuildConfig to start (kubectl archway start-build NAME) or a build to run again (--from-build NAME)")
	case so.fromBuild != "" && so.binary.set():
		return errors.New("--from-build runs a build again with its own input: leave out --from-dir, --from-file, --from-archive and --from-repo")
	case so.listWebhooks != "" && (so.fromBuild != "" || so.binary.set() || so.follow || so.wait):
		return errors.New("--list-webhooks only prints the BuildConfig's webhook URLs: give it with the BuildConfig alone")
	}
	if so.listWebhooks != "" && so.listWebhooks != "all" && !slices.Contains(webhookTypes, so.listWebhooks) {
		return fmt.Errorf("--list-webhooks %q: use all, %s", so.listWebhooks, strings.Join(webhookTypes, ", "))
	}
	return nil
}

func (so *startOptions) run(cmd *cobra.Command, o *env, args []string) error {
	ctx := cmd.Context()
	if err := so.check(args); err != nil {
		return err
	}
	req, err := so.request(cmd)
	if err != nil {
		return err
	}
	printer, err := so.print.printer()
	if err != nil {
		return err
	}
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	var bcName string
	if len(args) == 1 {
		if _, bcName, err = resourceArg(args[0], kindBuildConfig, kindBuildConfig); err != nil {
			return err
		}
	}
	if so.listWebhooks != "" {
		return so.printWebhooks(ctx, c, o, ns, bcName)
	}
	var b *buildv1.Build
	switch {
	case so.fromBuild != "":
		var name string
		if name, err = buildName(so.fromBuild); err != nil {
			return fmt.Errorf("--from-build: %w", err)
		}
		b, err = instantiate.NewStarter(c, nil).Clone(ctx, ns, name, req)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("--from-build: %w", err)
		}
	case so.binary.set():
		b, err = so.startBinary(ctx, o, c, ns, bcName, req)
	default:
		b, err = so.start(ctx, c, ns, bcName, req)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return notFoundHelp(ctx, c, ns, bcName, err)
		}
		return err
	}
	if err := printer.PrintObj(b, o.streams.Out); err != nil {
		return err
	}
	if !so.follow && !so.wait {
		return nil
	}
	f := &follower{c: c, cs: cs, ns: ns, name: b.Name, out: o.streams.Out, logs: so.follow, table: so.follow, tty: isTerminal(o.streams.Out)}
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
	if isBinary(bc) {
		return nil, fmt.Errorf("buildconfig %q has a binary source: give --from-dir, --from-file, --from-archive or --from-repo", bcName)
	}
	return instantiate.NewStarter(c, nil).Start(ctx, ns, bcName, req)
}

// startBinary reads the BuildConfig (where its build context and
// Dockerfile are), then uploads the input. A user who may start binary
// builds but not read the BuildConfig uploads as if its context were the
// input's root, and the endpoint decides.
func (so *startOptions) startBinary(ctx context.Context, o *env, c client.Client, ns, bcName string, req instantiate.Request) (*buildv1.Build, error) {
	bc := &buildv1.BuildConfig{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: bcName}, bc); {
	case apierrors.IsForbidden(err):
		bc = &buildv1.BuildConfig{}
	case err != nil:
		return nil, err
	default:
		if err := instantiate.CheckStrategyOptions(bc.Spec.Strategy, req); err != nil {
			return nil, err
		}
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	in := so.binary
	in.context = contextOf(bc)
	if in.repo != "" {
		snap, err := snapshotRepo(ctx, in.repo, so.commit, o.streams.ErrOut)
		if err != nil {
			return nil, err
		}
		defer snap.remove()
		in.dir = snap.dir
		req.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &snap.revision}
	}
	return startBinary(ctx, cfg, so.endpoint, ns, bcName, in, req)
}

func isBinary(bc *buildv1.BuildConfig) bool {
	return bc.Spec.Source.Type == buildv1.BuildSourceBinary || (bc.Spec.Source.Type == "" && bc.Spec.Source.Binary != nil)
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

// getBuildConfig reads a BuildConfig; one that does not exist is an error
// naming those the namespace has.
func getBuildConfig(ctx context.Context, c client.Client, ns, name string) (*buildv1.BuildConfig, error) {
	bc := &buildv1.BuildConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFoundHelp(ctx, c, ns, name, err)
		}
		return nil, err
	}
	return bc, nil
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
