package buildconfig

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/version"
)

// TestPluginCancelBuildConfig: cancel-build bc/NAME --state cancels the
// BuildConfig's builds in those states only, bc/NAME alone every build
// that has not ended, a wrong --state nothing, and --restart runs a
// cancelled build again.
func TestPluginCancelBuildConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-cancel")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	h.create(h.bcObj("other", buildv1.BuildRunPolicyParallel))
	for range 4 {
		if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := plugin(h.ctx, h.ns, "start-build", "other"); err != nil {
		t.Fatal(err)
	}
	h.setPhase("app-1", buildv1.BuildPhaseRunning)
	h.setPhase("app-2", buildv1.BuildPhasePending)
	h.setPhase("app-4", buildv1.BuildPhaseComplete) // app-3 stays New
	cancelled := func() map[string]bool {
		got := map[string]bool{}
		for _, n := range []string{"app-1", "app-2", "app-3", "app-4", "other-1"} {
			got[n] = h.build(n).Status.Cancelled
		}
		return got
	}

	if _, err := plugin(h.ctx, h.ns, "cancel-build", "bc/app", "--state", "new,done"); err == nil || !strings.Contains(err.Error(), `--state "done": use new, pending or running`) {
		t.Errorf("--state done: %v", err)
	}
	out, err := plugin(h.ctx, h.ns, "cancel-build", "bc/app", "--state=new,pending")
	if err != nil || out != "build.build.openshift.io/app-2 cancelled\nbuild.build.openshift.io/app-3 cancelled\n" {
		t.Fatalf("cancel-build bc/app --state=new,pending: %v, %q", err, out)
	}
	if got := cancelled(); !got["app-2"] || !got["app-3"] || got["app-1"] || got["app-4"] || got["other-1"] {
		t.Errorf("cancelled after --state=new,pending: %v", got)
	}
	out, err = plugin(h.ctx, h.ns, "cancel-build", "app-1", "--state", "pending")
	if err != nil || out != "build.build.openshift.io/app-1 is Running, not cancelled (--state)\n" || h.build("app-1").Status.Cancelled {
		t.Errorf("cancel-build app-1 --state pending: %v, %q", err, out)
	}
	// app-2 and app-3 stay New/Pending (no controller runs), so they are
	// cancelled again: the patch is idempotent.
	out, err = plugin(h.ctx, h.ns, "cancel-build", "buildconfig/app", "--restart")
	if err != nil || !strings.Contains(out, "build.build.openshift.io/app-1 cancelled\n") ||
		!strings.Contains(out, "build.build.openshift.io/app-1 restarted as build.build.openshift.io/app-5\n") {
		t.Fatalf("cancel-build bc/app --restart: %v, %q", err, out)
	}
	if got := cancelled(); !got["app-1"] || got["app-4"] || got["other-1"] {
		t.Errorf("cancelled after bc/app: %v", got)
	}
	if b := h.build("app-5"); b.Status.Cancelled || b.Annotations[buildv1.BuildNumberAnnotation] != "5" {
		t.Errorf("app-5: cancelled %v, number %s", b.Status.Cancelled, b.Annotations[buildv1.BuildNumberAnnotation])
	}
	if _, err := plugin(h.ctx, h.ns, "cancel-build", "bc/ap"); err == nil || !strings.Contains(err.Error(), `buildconfig "ap" not found in namespace "`+h.ns+`"; its BuildConfigs: app, other`) {
		t.Errorf("cancel-build bc/ap: %v", err)
	}
}

// TestPluginDescribeBuildConfig: describe bc shows what oc describe bc
// shows, with the webhook URLs (the secret as <secret>) and the builds,
// newest first.
func TestPluginDescribeBuildConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-describe")
	bc := h.bcObj("app", buildv1.BuildRunPolicySerial,
		buildv1.BuildTriggerPolicy{Type: buildv1.GitHubWebHookBuildTriggerType, GitHubWebHook: &buildv1.WebHookTrigger{Secret: "s3cr3t-gh"}},
		buildv1.BuildTriggerPolicy{Type: buildv1.GenericWebHookBuildTriggerType, GenericWebHook: &buildv1.WebHookTrigger{Secret: "s3cr3t-gen", AllowEnv: true}})
	h.create(bc)
	for range 2 {
		if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
			t.Fatal(err)
		}
	}
	h.setPhase("app-1", buildv1.BuildPhaseComplete)
	for _, args := range [][]string{{"describe", "bc", "app"}, {"describe", "bc/app"}, {"describe", "buildconfig", "app"}} {
		out, err := plugin(h.ctx, h.ns, append(args, "--build-endpoint", "https://builds.example.com")...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		base := "https://builds.example.com/apis/build.openshift.io/v1/namespaces/" + h.ns + "/buildconfigs/app/webhooks/<secret>/"
		for _, want := range []string{"Name:", "app", "Latest Version:", "2", "Strategy:", "Docker", "URL:", "https://git.example.com/team/app.git",
			"Output to:", "DockerImage registry.example.com/team/app:latest", "Platforms:", "linux/amd64, linux/arm64",
			"Build Run Policy:", "Serial", "Triggered by:", "GitHub, Generic", "Webhook GitHub:", base + "github", "Webhook Generic:", base + "generic",
			"AllowEnv:", "true", "Builds History Limit:", "Successful:", "Failed:", "app-2", "new", "app-1", "complete", "Events:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(out, "s3cr3t") || strings.Index(out, "app-2  ") > strings.Index(out, "app-1  ") {
			t.Errorf("%v shows a secret, or the builds oldest first:\n%s", args, out)
		}
	}
	if _, err := plugin(h.ctx, h.ns, "describe", "pod", "app"); err == nil || !strings.Contains(err.Error(), `"pod" is not a kind this command takes`) {
		t.Errorf("describe pod: %v", err)
	}
}

// TestPluginCompletion: the shell completion of Build and BuildConfig
// names, through cobra's __complete as the shells call it.
func TestPluginCompletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-complete")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	h.create(h.bcObj("web", buildv1.BuildRunPolicyParallel))
	if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
		t.Fatal(err)
	}
	complete := func(args ...string) string {
		t.Helper()
		line := append([]string{"__complete", "--kubeconfig", testBed.Kubeconfig, "-n", h.ns}, args...)
		out, err := pluginRaw(h.ctx, line...)
		if err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		// The last line is cobra's directive (":4"), then a note on stderr.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var words []string
		for _, l := range lines {
			if strings.HasPrefix(l, ":") || strings.HasPrefix(l, "Completion ended") {
				continue
			}
			words = append(words, l)
		}
		return strings.Join(words, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"start-build", ""}, "app web"},
		{[]string{"start-build", "w"}, "web"},
		{[]string{"start-build", "bc/"}, "bc/app bc/web"},
		{[]string{"logs", ""}, "app-1 build/ bc/"},
		{[]string{"logs", "bc/a"}, "bc/app"},
		{[]string{"cancel-build", "build/"}, "build/app-1"},
		{[]string{"describe", ""}, "build bc buildconfig"},
		{[]string{"describe", "bc", ""}, "app web"},
		{[]string{"start-build", "--from-build", ""}, "app-1"},
		{[]string{"start-build", "app", "--platform", "linux/amd64,linux/a"}, "linux/amd64,linux/amd64 linux/amd64,linux/arm64 linux/amd64,linux/arm/v7"},
		{[]string{"start-build", "app", ""}, ""},
	} {
		if got := complete(tc.args...); got != tc.want {
			t.Errorf("complete %q: %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestPluginVersion: version prints the plugin's version and, from the
// cluster, its Kubernetes version and that archway serves the build API;
// --client reaches no cluster.
func TestPluginVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-version")
	out, err := plugin(h.ctx, h.ns, "version")
	// The version the test binary was linked with (make test sets it).
	if err != nil || !strings.Contains(out, "Client Version: "+version.Version+"\nKubernetes Version: v1.") || !strings.Contains(out, "Build API (build.openshift.io/v1): archway\n") {
		t.Errorf("version: %v, %q", err, out)
	}
	out, err = pluginRaw(h.ctx, "version", "--client", "-o", "json", "--server", "https://127.0.0.1:1")
	if err != nil || !strings.Contains(out, `"clientVersion": "`+version.Version+`"`) || strings.Contains(out, "kubernetesVersion") {
		t.Errorf("version --client: %v, %q", err, out)
	}
	if _, err := pluginRaw(h.ctx, "version", "--server", "https://127.0.0.1:1", "--kubeconfig", "/dev/null"); err == nil {
		t.Error("version with an unreachable cluster: no error")
	}
}

// TestPluginDescribeBuildCommit: once a Build's commit is recorded in
// spec.revision.git (set once, as the build records the commit it pinned),
// describe build shows it as oc describe build does: the short commit with
// its message's first line, and the author.
func TestPluginDescribeBuildCommit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-commit")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
		t.Fatal(err)
	}
	out, err := plugin(h.ctx, h.ns, "describe", "build", "app-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "Commit:") || strings.Contains(out, "Author:") {
		t.Errorf("describe build shows a commit before one is recorded:\n%s", out)
	}
	const commit = "9f1c2e94b7d3a5e6f708192a3b4c5d6e7f809123"
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "app-1"}}
	patch := `{"spec":{"revision":{"type":"Git","git":{"commit":"` + commit + `","author":{"name":"Ada Lovelace","email":"ada@example.com"},` +
		`"committer":{"name":"CI","email":"ci@example.com"},"message":"Pin one commit for every platform\n\nThe body is not shown."}}}}`
	if err := k8s.Patch(h.ctx, b, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	out, err = plugin(h.ctx, h.ns, "describe", "build", "app-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^Commit:\s+9f1c2e94b7d3 \(Pin one commit for every platform\)$`,
		`(?m)^Author:\s+Ada Lovelace <ada@example\.com>$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe build has no line %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "The body is not shown") {
		t.Errorf("describe build shows the message's body:\n%s", out)
	}
}

// TestPluginDescribeSelector: describe -l describes every build (or
// BuildConfig) whose labels match, in name order, as kubectl describe -l
// does; --show-events=false leaves the events out; a bad selector, or a
// NAME with -l, is refused.
func TestPluginDescribeSelector(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-selector")
	app := h.bcObj("app", buildv1.BuildRunPolicyParallel)
	app.Labels = map[string]string{"team": "red"}
	h.create(app)
	h.create(h.bcObj("other", buildv1.BuildRunPolicyParallel))
	for _, bc := range []string{"app", "app", "other"} {
		if _, err := plugin(h.ctx, h.ns, "start-build", bc); err != nil {
			t.Fatal(err)
		}
	}
	names := regexp.MustCompile(`(?m)^Name:\s+(\S+)$`)
	described := func(out string) []string {
		var got []string
		for _, m := range names.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		return got
	}
	out, err := plugin(h.ctx, h.ns, "describe", "build", "-l", buildv1.BuildConfigLabel+"=app")
	if err != nil {
		t.Fatal(err)
	}
	if got := described(out); !slices.Equal(got, []string{"app-1", "app-2"}) {
		t.Errorf("describe build -l ...=app described %v, want [app-1 app-2]:\n%s", got, out)
	}
	if strings.Count(out, "\nEvents:") != 2 {
		t.Errorf("describe build -l: want the events of each build:\n%s", out)
	}
	out, err = plugin(h.ctx, h.ns, "describe", "bc", "-l", "team=red", "--show-events=false")
	if err != nil {
		t.Fatal(err)
	}
	if got := described(out); !slices.Equal(got, []string{"app"}) || strings.Contains(out, "Events:") {
		t.Errorf("describe bc -l team=red --show-events=false: described %v (want [app]), events shown: %v\n%s", got, strings.Contains(out, "Events:"), out)
	}
	out, err = plugin(h.ctx, h.ns, "describe", "build", "app-1", "--show-events=false")
	if err != nil || strings.Contains(out, "Events:") || !slices.Equal(described(out), []string{"app-1"}) {
		t.Errorf("describe build app-1 --show-events=false: %v\n%s", err, out)
	}
	out, err = plugin(h.ctx, h.ns, "describe", "build", "-l", "team=blue")
	if err != nil || !strings.Contains(out, "No resources found in "+h.ns+" namespace.") {
		t.Errorf("describe build -l team=blue: %v, %q", err, out)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "build", "-l", "team in (red"}, `--selector "team in (red"`},
		{[]string{"describe", "build", "app-1", "-l", "team=red"}, `describe -l: give only the kind (build or bc), not "build app-1"`},
		{[]string{"describe", "pods", "-l", "team=red"}, `describe -l: give only the kind (build or bc), not "pods"`},
	} {
		if _, err := plugin(h.ctx, h.ns, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error with %q", bad.args, err, bad.want)
		}
	}
}

// TestPluginLogsIgnoreErrors: a pod whose log cannot be read (bound to a
// node that is gone) does not keep the others' logs from being read: logs
// reports every failing pod and exits non-zero, or with --ignore-errors
// reports them on stderr and exits 0, as kubectl logs --ignore-errors.
func TestPluginLogsIgnoreErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-logerr")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
		t.Fatal(err)
	}
	h.setPhase("app-1", buildv1.BuildPhaseComplete)
	for _, plat := range []string{"linux/amd64", "linux/arm64"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "app-1-" + strings.ReplaceAll(plat, "/", "-"),
				Labels: map[string]string{buildv1.BuildLabel: "app-1"}, Annotations: map[string]string{buildv1.PlatformAnnotation: plat}},
			Spec: corev1.PodSpec{NodeName: "node-gone", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "build", Image: "registry.example.com/archway/builder:test"}}},
		}
		h.create(pod)
		pod.Status.Phase = corev1.PodSucceeded
		if err := k8s.Status().Update(h.ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"logs", "build/app-1"}, {"logs", "build/app-1", "-f"}} {
		out, err := plugin(h.ctx, h.ns, args...)
		if err == nil || !strings.Contains(err.Error(), "logs of pod app-1-linux-amd64") || !strings.Contains(err.Error(), "logs of pod app-1-linux-arm64") {
			t.Errorf("%v: %v, want an error naming both pods\n%s", args, err, out)
		}
		out, err = plugin(h.ctx, h.ns, append(args, "--ignore-errors")...)
		if err != nil || !strings.Contains(out, "error: logs of pod app-1-linux-amd64") || !strings.Contains(out, "logs of pod app-1-linux-arm64") {
			t.Errorf("%v --ignore-errors: %v, want no error and both pods reported:\n%s", args, err, out)
		}
	}
}

// TestPluginBuildLogLevel: start-build --build-loglevel N gives the build
// BUILD_LOGLEVEL=N in its strategy's env, as oc start-build does (the
// builder reads it: test/integration/builder's TestDockerBuildLogLevel); a
// level that is not one, or one given twice, starts nothing.
func TestPluginBuildLogLevel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-loglevel")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"start-build", "app", "--build-loglevel", "loud"}, `--build-loglevel "loud": give a level of 0 or more`},
		{[]string{"start-build", "app", "--build-loglevel", "5", "-e", "BUILD_LOGLEVEL=2"}, "--build-loglevel and --env BUILD_LOGLEVEL=... both set the log level"},
	} {
		if _, err := plugin(h.ctx, h.ns, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error with %q", bad.args, err, bad.want)
		}
	}
	if _, err := plugin(h.ctx, h.ns, "start-build", "app", "--build-loglevel", "5", "-e", "A=1"); err != nil {
		t.Fatal(err)
	}
	if names := h.buildNames(); !slices.Equal(names, []string{"app-1"}) {
		t.Errorf("builds %v, want only app-1: the refused starts made none", names)
	}
	env := h.build("app-1").Spec.Strategy.DockerStrategy.Env
	want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "BUILD_LOGLEVEL", Value: "5"}}
	if !slices.Equal(env, want) {
		t.Errorf("app-1's env = %v, want %v", env, want)
	}
}
