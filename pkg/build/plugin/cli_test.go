package plugin

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/cacheprune"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
)

func TestBuildName(t *testing.T) {
	for arg, want := range map[string]string{"app-1": "app-1", "build/app-1": "app-1", "builds/app-1": "app-1", "build.build.openshift.io/app-1": "app-1", "pod/app-1": ""} {
		got, err := buildName(arg)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("buildName(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
}

func TestEndResult(t *testing.T) {
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: "app-3"}}
	b.Status.Phase = buildv1.BuildPhaseComplete
	if err := endResult(b); err != nil {
		t.Errorf("Complete: %v", err)
	}
	b.Status.Phase, b.Status.Reason, b.Status.Message = buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformBuildFailed, "linux/arm64 failed"
	if err := endResult(b); err == nil || err.Error() != "build app-3 failed (PlatformBuildFailed): linux/arm64 failed" {
		t.Errorf("Failed: %v", err)
	}
}

func TestPodsOfPlatformAndTable(t *testing.T) {
	pods := []buildPod{
		{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-build-linux-arm64"}, Spec: corev1.PodSpec{NodeName: "node-arm64-1"}}, platform: "linux/arm64"},
		{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-manifest-list"}}, platform: manifestListLabel},
	}
	if got, err := podsOfPlatforms(pods, []string{"linux/arm64/v8"}); err != nil || len(got) != 1 || got[0].platform != "linux/arm64" {
		t.Errorf("linux/arm64/v8: %v, %v", got, err)
	}
	if got, err := podsOfPlatforms(pods, []string{"manifest-list", "linux/arm64"}); err != nil || len(got) != 2 {
		t.Errorf("manifest-list,linux/arm64: %v, %v", got, err)
	}
	if _, err := podsOfPlatforms(pods, []string{"linux/arm64", "linux/s390x"}); err == nil || !strings.Contains(err.Error(), "linux/s390x: the build has no pod for it; its pods are for: [linux/arm64 manifest-list]") {
		t.Errorf("linux/s390x: %v", err)
	}
	b := &buildv1.Build{}
	b.Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/arm64", Phase: buildv1.BuildPhaseComplete, PodName: "a-build-linux-arm64",
		Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:abc"}}}
	table := platformTable(b, pods, true)
	if !strings.Contains(table, "linux/arm64  Complete  -       node-arm64-1  sha256:abc") || strings.Contains(table, "EMULATED") {
		t.Errorf("table:\n%s", table)
	}
}

func TestTableShowsEmulation(t *testing.T) {
	pods := []buildPod{
		{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-build-linux-amd64"}, Spec: corev1.PodSpec{NodeName: "node-amd64-1"}}, platform: "linux/amd64"},
		{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-build-linux-arm-v7"}, Spec: corev1.PodSpec{NodeName: "node-amd64-2"}}, platform: "linux/arm/v7"},
	}
	b := &buildv1.Build{}
	b.Status.Platforms = []buildv1.BuildStatusPlatform{
		{Platform: "linux/amd64", Phase: buildv1.BuildPhaseRunning, PodName: "a-build-linux-amd64"},
		{Platform: "linux/arm/v7", Phase: buildv1.BuildPhaseRunning, PodName: "a-build-linux-arm-v7", EmulatedOn: "amd64"},
	}
	for _, details := range []bool{true, false} {
		lines := strings.Split(platformTable(b, pods, details), "\n")
		if !strings.Contains(lines[0], "NODE          EMULATED ON") ||
			!strings.Contains(lines[1], "node-amd64-1  -") || !strings.Contains(lines[2], "node-amd64-2  amd64") {
			t.Errorf("details %v: table:\n%s", details, strings.Join(lines, "\n"))
		}
	}
}

func TestPruneCacheResolution(t *testing.T) {
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	check := func(what, override, wantRepo string, wantDefaulted bool, wantErr string) {
		t.Helper()
		repo, defaulted, err := cacheRepositoryOf(bc, override)
		switch {
		case wantErr != "":
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: %q, %v; want an error with %q", what, repo, err, wantErr)
			}
		case err != nil || repo != wantRepo || defaulted != wantDefaulted:
			t.Errorf("%s: %q (defaulted %v), %v; want %q (defaulted %v)", what, repo, defaulted, err, wantRepo, wantDefaulted)
		}
	}
	check("not a Docker build", "", "", false, "is not a Docker build")
	check("--repository", "registry.example.com/team/c", "registry.example.com/team/c", false, "")
	bc.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{}
	check("the controller's default, no output", "", "", false, "no output")
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}
	check("the controller's default", "", "registry.example.com/team/app-cache", true, "")
	bc.Spec.Strategy.DockerStrategy.LayerCache = &buildv1.LayerCache{Repository: "registry.example.com/team/c"}
	check("the controller's default mode, own repository", "", "registry.example.com/team/c", true, "")
	bc.Spec.Strategy.DockerStrategy.LayerCache.Mode = buildv1.LayerCacheDisabled
	check("Disabled", "", "", false, "has its layer cache off (spec.strategy.dockerStrategy.layerCache.mode is Disabled)")
	check("Disabled, --repository", "registry.example.com/team/d", "registry.example.com/team/d", false, "")
	bc.Spec.Strategy.DockerStrategy.LayerCache.Mode = buildv1.LayerCacheRegistry
	check("own repository", "", "registry.example.com/team/c", false, "")
	bc.Spec.Strategy.DockerStrategy.LayerCache.Repository = ""
	check("from the output", "", "registry.example.com/team/app-cache", false, "")
	bc.Spec.Output.To = nil
	check("no output", "", "", false, "no output")
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}

	bc.Spec.Platforms = []string{"linux/amd64", "linux/arm64/v8"}
	builds := []buildv1.Build{{ObjectMeta: metav1.ObjectMeta{Name: "app-2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "app-1"}}}
	builds[0].Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/s390x"}, {Platform: "linux/arm64"}}
	builds[1].Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/ppc64le"}, {Platform: "not a platform"}}
	if got := strings.Join(platformsOf(bc, builds), ","); got != "linux/amd64,linux/arm64/v8,linux/ppc64le,linux/s390x" {
		t.Errorf("platforms: %s", got)
	}
}

func TestPrintFlags(t *testing.T) {
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "team"}}
	b.Spec.Platforms = []string{"linux/amd64", "linux/arm64"}
	for _, tc := range []struct{ output, want, wantErr string }{
		{output: "", want: "build.build.openshift.io/app-1 started\n"},
		{output: "name", want: "build.build.openshift.io/app-1\n"},
		{output: "jsonpath={.spec.platforms[1]}", want: "linux/arm64"},
		{output: "go-template={{.metadata.namespace}}/{{.kind}}", want: "team/Build"},
		{output: "custom-columns=NAME:.metadata.name,PLATFORMS:.spec.platforms", want: "NAME    PLATFORMS\napp-1   [linux/amd64 linux/arm64]\n"},
		{output: "wide", wantErr: `--output "wide": use one of json, yaml, kyaml, name, go-template`},
		{output: "jsonpath={.spec", wantErr: "--output"},
	} {
		pf := newPrintFlags("started", testScheme())
		pf.generic.OutputFormat = &tc.output
		p, err := pf.printer()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("-o %s: %v, want an error with %q", tc.output, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("-o %s: %v", tc.output, err)
		}
		var out strings.Builder
		if err := p.PrintObj(b, &out); err != nil || out.String() != tc.want {
			t.Errorf("-o %s: %q, %v; want %q", tc.output, out.String(), err, tc.want)
		}
	}
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(buildv1.AddToScheme(s))
	return s
}

func TestWebhookURLs(t *testing.T) {
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"}}
	secret := &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: "hook"}}
	bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{
		{Type: buildv1.ConfigChangeBuildTriggerType},
		{Type: buildv1.GitHubWebHookBuildTriggerType, GitHubWebHook: secret},
		{Type: buildv1.GenericWebHookBuildTriggerType, GenericWebHook: &buildv1.WebHookTrigger{Secret: "s3cr3t", AllowEnv: true}},
	}
	hooks := webhooksOf(bc, webhookBase{server: "https://api.example.com:6443/", prefix: paths.AggregatedPrefix})
	if len(hooks) != 2 || hooks[0].url != "https://api.example.com:6443/apis/triggers.archway.dev/v1alpha1/namespaces/team/buildconfigs/app/webhooks/<secret>/github" ||
		hooks[1].typ != "generic" || !hooks[1].allowEnv || strings.Contains(hooks[1].url, "s3cr3t") {
		t.Errorf("webhooks %+v", hooks)
	}
	direct := webhooksOf(bc, webhookBase{server: "https://builds.example.com", prefix: paths.OpenShiftPrefix})
	if direct[0].url != "https://builds.example.com/apis/build.openshift.io/v1/namespaces/team/buildconfigs/app/webhooks/<secret>/github" {
		t.Errorf("webhooks at the endpoint %+v", direct)
	}
	var out strings.Builder
	bc.Status.LastVersion = 2
	describeConfig(&out, bc, []buildv1.Build{{ObjectMeta: metav1.ObjectMeta{Name: "app-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "app-2"}}}, webhookBase{server: "https://builds.example.com", prefix: paths.OpenShiftPrefix})
	for _, want := range []string{"Latest Version:", "Triggered by:", "Config, GitHub, Generic", "Webhook GitHub:\n URL:",
		"webhooks/<secret>/github\nWebhook Generic:", "AllowEnv:", "true", "Builds History Limit:", "app-2  new", "app-1  new"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "s3cr3t") || strings.Index(out.String(), "app-2") > strings.Index(out.String(), "app-1 ") {
		t.Errorf("describe shows the secret, or not the newest build first:\n%s", out.String())
	}
}

// TestPruneCacheFlags: prune cache spells the platforms flag as every
// command does (--platforms read as --platform, platforms completed) and
// takes kubectl's -o formats; a bad -o or platform is refused before the
// cluster is reached (the kubeconfig here does not exist).
func TestPruneCacheFlags(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out strings.Builder
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
		cmd.SetArgs(append(args, "--kubeconfig", filepath.Join(t.TempDir(), "none")))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prune", "cache", "app", "--platforms", "linux/foo"}, `--platform: "linux/foo"`},
		{[]string{"prune", "cache", "app", "--platform", "linux/foo"}, `--platform: "linux/foo"`},
		{[]string{"prune", "cache", "app", "-o", "wide"}, `--output "wide": use one of json, yaml`},
		{[]string{"prune", "cache", "app", "-o", "name"}, `--output "name": the cache repositories pruned are not API objects`},
		{[]string{"prune", "cache", "app", "-o", "jsonpath={.items"}, "--output"},
		// Good flags reach the cluster: the kubeconfig is what fails.
		{[]string{"prune", "cache", "app", "--platforms", "linux/arm64", "-o", "jsonpath={.items[*].repository}"}, "none"},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (%s), want an error with %q", tc.args, err, out, tc.want)
		}
	}
	var out strings.Builder
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"__complete", "prune", "cache", "app", "--platforms", "linux/arm64,linux/s"})
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), "linux/arm64,linux/s390x\n") {
		t.Errorf("completion of --platforms:\n%s", out.String())
	}
}

func TestPruneCacheResultList(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	results := []cacheprune.Repository{
		{Repository: "r.example/app-cache-linux-amd64", Tags: []cacheprune.Tag{{Tag: "result-1", Created: &created, Action: cacheprune.WouldRemove}}},
		{Repository: "r.example/app-cache-linux-arm64", Error: "denied"},
	}
	list, err := resultList(results)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ output, want string }{
		{`jsonpath={range .items[*]}{.repository} {.tags[*].action}{"\n"}{end}`, "r.example/app-cache-linux-amd64 would remove\nr.example/app-cache-linux-arm64 \n"},
		{"custom-columns=REPOSITORY:.repository,ERROR:.error", "REPOSITORY                        ERROR\nr.example/app-cache-linux-amd64   <none>\nr.example/app-cache-linux-arm64   denied\n"},
		{"go-template={{len .items}}", "2"},
	} {
		po := &pruneCacheOptions{print: newPrintFlags("", testScheme())}
		po.print.generic.OutputFormat = &tc.output
		p, err := po.printer()
		if err != nil {
			t.Fatalf("-o %s: %v", tc.output, err)
		}
		var out strings.Builder
		if err := p.PrintObj(list, &out); err != nil || out.String() != tc.want {
			t.Errorf("-o %s: %q, %v; want %q", tc.output, out.String(), err, tc.want)
		}
	}
	po := &pruneCacheOptions{print: newPrintFlags("", testScheme())}
	json := "json"
	po.print.generic.OutputFormat = &json
	p, err := po.printer()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := p.PrintObj(list, &out); err != nil || !strings.Contains(out.String(), `"kind": "List"`) || !strings.Contains(out.String(), `"action": "would remove"`) {
		t.Errorf("-o json: %v\n%s", err, out.String())
	}
}
