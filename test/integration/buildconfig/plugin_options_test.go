package buildconfig

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestPluginStartBuildOptions: --build-arg and --no-cache reach the Build
// (and --no-cache=false overrides the BuildConfig's), --platform and
// --platforms are one flag, -o takes kubectl's printers and a wrong -o
// starts nothing, --from-build runs a build again with its own spec as the
// next number, and --list-webhooks prints the webhook URLs.
func TestPluginStartBuildOptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-options")
	bc := h.bcObj("app", buildv1.BuildRunPolicyParallel, buildv1.BuildTriggerPolicy{Type: buildv1.GenericWebHookBuildTriggerType,
		GenericWebHook: &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: "hook"}}})
	bc.Spec.Strategy.DockerStrategy.BuildArgs = []corev1.EnvVar{{Name: "GO", Value: "1.25"}, {Name: "CGO", Value: "0"}}
	bc.Spec.Strategy.DockerStrategy.NoCache = true
	h.create(bc)

	out, err := plugin(h.ctx, h.ns, "start-build", "app", "--build-arg", "GO=1.26", "--build-arg", "TAGS=a b", "--no-cache=false",
		"--platform", "linux/amd64", "--platform", "linux/s390x", "-o", "jsonpath={.metadata.name} {.spec.strategy.dockerStrategy.buildArgs[0].value}")
	if err != nil || out != "app-1 1.26" {
		t.Fatalf("start-build: %v, %q", err, out)
	}
	b := h.build("app-1")
	ds := b.Spec.Strategy.DockerStrategy
	args, _ := json.Marshal(ds.BuildArgs)
	if string(args) != `[{"name":"GO","value":"1.26"},{"name":"CGO","value":"0"},{"name":"TAGS","value":"a b"}]` || ds.NoCache ||
		strings.Join(b.Spec.Platforms, ",") != "linux/amd64,linux/s390x" {
		t.Errorf("app-1: buildArgs %s, noCache %v, platforms %v", args, ds.NoCache, b.Spec.Platforms)
	}
	out, err = plugin(h.ctx, h.ns, "start-build", "bc/app", "--platforms", "linux/arm64", "-o", "custom-columns=NAME:.metadata.name,PLATFORMS:.spec.platforms[*],NOCACHE:.spec.strategy.dockerStrategy.noCache")
	if err != nil || out != "NAME    PLATFORMS     NOCACHE\napp-2   linux/arm64   true\n" {
		t.Errorf("start-build --platforms -o custom-columns: %v, %q", err, out)
	}
	out, err = plugin(h.ctx, h.ns, "start-build", "app", "-o", "go-template={{.metadata.name}}:{{len .spec.platforms}}")
	if err != nil || out != "app-3:2" {
		t.Errorf("-o go-template: %v, %q", err, out)
	}

	// A wrong -o, a malformed --build-arg or a bad platform starts
	// nothing: no Build, no number taken.
	for _, args := range [][]string{
		{"-o", "wide"}, {"-o", "jsonpath={.metadata"}, {"--build-arg", "NOVALUE"}, {"--platform", "linux/nope"}, {"--allow-fail", "x/y/z/w"},
	} {
		_, err := plugin(h.ctx, h.ns, append([]string{"start-build", "app"}, args...)...)
		if err == nil {
			t.Errorf("start-build %v: no error", args)
		}
	}
	if n := h.bc("app").Status.LastVersion; n != 3 {
		t.Errorf("lastVersion %d after the refused starts, want 3", n)
	}
	h.waitBuildNames("app-1", "app-2", "app-3")

	// --from-build: app-1's spec (its platforms and build args), not the
	// BuildConfig's, as the next number, with --env applied.
	out, err = plugin(h.ctx, h.ns, "start-build", "--from-build", "build/app-1", "--env", "RELEASE=2")
	if err != nil || out != "build.build.openshift.io/app-4 started\n" {
		t.Fatalf("--from-build: %v, %q", err, out)
	}
	b4 := h.build("app-4")
	if strings.Join(b4.Spec.Platforms, ",") != "linux/amd64,linux/s390x" || b4.Spec.Strategy.DockerStrategy.BuildArgs[0].Value != "1.26" ||
		b4.Spec.Strategy.DockerStrategy.NoCache || len(b4.Spec.Strategy.DockerStrategy.Env) != 1 ||
		b4.Annotations[buildv1.BuildNumberAnnotation] != "4" || b4.OwnerReferences[0].Name != "app" {
		t.Errorf("app-4: %+v %v", b4.Spec, b4.Annotations)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"start-build", "--from-build", "app-9"}, `--from-build: builds.build.openshift.io "app-9" not found`},
		{[]string{"start-build", "app", "--from-build", "app-1"}, "give a BuildConfig or --from-build, not both"},
		{[]string{"start-build"}, "give the BuildConfig to start"},
		{[]string{"start-build", "--from-build", "app-1", "--from-dir", "."}, "--from-build runs a build again with its own input"},
		{[]string{"start-build", "pod/app"}, `"pod" is not a kind this command takes`},
	} {
		if _, err := plugin(h.ctx, h.ns, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}

	// Build args and noCache belong to the Docker strategy.
	src := h.bcObj("s2i", buildv1.BuildRunPolicyParallel)
	src.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType,
		SourceStrategy: &buildv1.SourceBuildStrategy{From: corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/s2i/go:1"}}}
	h.create(src)
	if _, err := plugin(h.ctx, h.ns, "start-build", "s2i", "--no-cache"); err == nil || !strings.Contains(err.Error(), "options of the Docker strategy, and this build's strategy is Source") {
		t.Errorf("--no-cache on a Source build: %v", err)
	}
	if n := h.bc("s2i").Status.LastVersion; n != 0 {
		t.Errorf("s2i lastVersion %d, want 0", n)
	}

	out, err = plugin(h.ctx, h.ns, "start-build", "app", "--list-webhooks", "all", "--build-endpoint", "https://builds.example.com")
	if want := "generic https://builds.example.com/apis/build.openshift.io/v1/namespaces/" + h.ns + "/buildconfigs/app/webhooks/<secret>/generic\n"; err != nil || out != want {
		t.Errorf("--list-webhooks: %v, %q, want %q", err, out, want)
	}
	if _, err := plugin(h.ctx, h.ns, "start-build", "app", "--list-webhooks", "github"); err == nil || !strings.Contains(err.Error(), "has no github webhook trigger") {
		t.Errorf("--list-webhooks github: %v", err)
	}
}
