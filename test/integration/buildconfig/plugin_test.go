package buildconfig

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	archwayplugin "github.com/archway-build/archway/pkg/build/plugin"
)

// plugin runs kubectl archway with args against the bed, in namespace ns.
func plugin(ctx context.Context, ns string, args ...string) (string, error) {
	return pluginRaw(ctx, append(args, "--kubeconfig", testBed.Kubeconfig, "-n", ns)...)
}

// pluginRaw runs kubectl archway with args as they are; its output and
// error output go to one string.
func pluginRaw(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := archwayplugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// TestPluginStartBuild: start-build through the same numbering, with the
// platform flags, the API's messages for bad ones, and a helpful error for
// a BuildConfig that does not exist.
func TestPluginStartBuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-start")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	h.create(h.bcObj("web", buildv1.BuildRunPolicyParallel))

	out, err := plugin(h.ctx, h.ns, "start-build", "ap")
	if err == nil || !strings.Contains(err.Error(), `buildconfig "ap" not found in namespace "`+h.ns+`"; its BuildConfigs: app, web`) {
		t.Errorf("unknown BuildConfig: %v (%s)", err, out)
	}
	out, err = plugin(h.ctx, h.ns, "start-build", "app", "--platforms", "linux/amd64,linux/s390x", "--allow-fail", "linux/s390x",
		"--env", "RELEASE=1.4", "--commit", "9f1c2e9b", "-o", "name")
	if err != nil || strings.TrimSpace(out) != "build.build.openshift.io/app-1" {
		t.Fatalf("start-build: %v, %q", err, out)
	}
	b := h.build("app-1")
	if strings.Join(b.Spec.Platforms, ",") != "linux/amd64,linux/s390x" || strings.Join(b.Spec.PlatformsAllowedToFail, ",") != "linux/s390x" ||
		b.Spec.Revision == nil || b.Spec.Revision.Git.Commit != "9f1c2e9b" || len(b.Spec.Strategy.DockerStrategy.Env) != 1 ||
		b.Spec.TriggeredBy[0].Message != "Manually triggered" {
		t.Errorf("app-1 spec: %+v", b.Spec)
	}
	_, err = plugin(h.ctx, h.ns, "start-build", "app", "--platforms", "linux/amd64,linux/arm64/v8,linux/arm64")
	if err == nil || !strings.Contains(err.Error(), `"linux/arm64" is the same platform as "linux/arm64/v8"; remove one of them`) {
		t.Errorf("duplicate platforms: %v", err)
	}
	out, err = plugin(h.ctx, h.ns, "start-build", "app")
	if err != nil || out != "build.build.openshift.io/app-2 started\n" {
		t.Errorf("second start: %v, %q", err, out)
	}
}

// TestPluginFollowDescribeCancel: start-build --follow prints the
// per-platform table as the Build controller resolves and runs the build,
// cancel-build cancels it (through the status subresource), --follow then
// exits with an error naming the phase, and describe shows the summary,
// the per-platform table and the events.
func TestPluginFollowDescribeCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-follow")
	startControllers(t, h.ns, true)
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := plugin(h.ctx, h.ns, "start-build", "app", "--platforms", "linux/amd64,linux/arm64,linux/ppc64le,linux/s390x", "--follow")
		done <- result{out, err}
	}()
	h.waitBuild("app-1", "pods for all four platforms", func(b *buildv1.Build) bool {
		return len(b.Status.Platforms) == 4 && b.Status.Platforms[3].PodName != "" && b.Status.Platforms[0].Phase == buildv1.BuildPhasePending
	})
	// --follow shows the node of each pod it has seen bound: cancel only
	// once all four are (a pod's name in the status comes before its
	// binding).
	if err := wait.PollUntilContextCancel(h.ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := testBed.Client.List(ctx, &pods, client.InNamespace(h.ns)); err != nil {
			return false, nil
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Labels[buildv1.PodRoleLabel] == buildv1.PodRoleBuild {
				bound++
			}
		}
		return bound == 4, nil
	}); err != nil {
		t.Fatalf("the four platform pods were not bound: %v", err)
	}
	out, err := plugin(h.ctx, h.ns, "cancel-build", "build/app-1")
	if err != nil || out != "build.build.openshift.io/app-1 cancelled\n" {
		t.Fatalf("cancel-build: %v, %q", err, out)
	}
	r := <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "build app-1 cancelled (CancelledBuild)") {
		t.Errorf("--follow of a cancelled build: err %v", r.err)
	}
	for _, want := range []string{"build.build.openshift.io/app-1 started", "PLATFORM", "linux/arm64", "linux/s390x", "node-ppc64le-1", "Cancelled"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("--follow output lacks %q:\n%s", want, r.out)
		}
	}
	// Not a terminal: a plain line per change, no cursor movements.
	if !strings.Contains(r.out, ": Pending") || !strings.Contains(r.out, "--- ") || strings.Contains(r.out, "\x1b[") {
		t.Errorf("--follow off a terminal writes escapes, or no change lines:\n%q", r.out)
	}
	out, err = plugin(h.ctx, h.ns, "describe", "build", "app-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "app-1", "Build Config:", "Status:", "Cancelled (CancelledBuild)", "Triggered by:", "Manually triggered",
		"Platforms:", "PLATFORM", "PHASE", "REASON", "NODE", "DIGEST", "DURATION", "linux/s390x", "node-s390x-1", "Events:", "BuildCancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	out, err = plugin(h.ctx, h.ns, "cancel-build", "app-1")
	if err != nil || !strings.Contains(out, "already ended (Cancelled)") {
		t.Errorf("second cancel: %v, %q", err, out)
	}
}
