package docker

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	_, _ = tb.Write([]byte("abc"))
	_, _ = tb.Write([]byte("defgh"))
	if tb.String() != "defgh" {
		t.Errorf("got %q", tb.String())
	}
}

func TestImageLabels(t *testing.T) {
	b := &buildv1.Build{}
	b.Name, b.Namespace = "app-7", "team"
	b.Spec.Source = buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git", Ref: "main"}, ContextDir: "web"}
	b.Spec.Output.ImageLabels = []buildv1.ImageLabel{{Name: "team", Value: "blue"}, {Name: labelBuildName, Value: "override"}}
	rev := &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{
		Commit: "abc123", Author: buildv1.SourceControlUser{Name: "Ada", Email: "ada@example.com"}, Message: "fix it"}}
	want := map[string]string{
		labelBuildName:        "override",
		labelBuildNamespace:   "team",
		labelSourceLocation:   "https://git.example.com/app.git",
		labelCommitRef:        "main",
		labelSourceContextDir: "web",
		labelCommitID:         "abc123",
		labelCommitAuthor:     "Ada <ada@example.com>",
		labelCommitMessage:    "fix it",
		"team":                "blue",
	}
	if got := imageLabels(b, rev); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestBuildArgsAndEnv(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	vars := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}}
	args, err := buildArgs(vars, none)
	if err != nil || !reflect.DeepEqual(args, map[string]string{"A": "1", "B": ""}) {
		t.Errorf("buildArgs = %v, %v", args, err)
	}
	env, err := buildEnv(vars, none)
	if err != nil || !reflect.DeepEqual(env, []string{"A=1", "B="}) {
		t.Errorf("buildEnv = %v, %v", env, err)
	}
	unresolved := []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{}}}
	if _, err := buildArgs(unresolved, none); statusReason(err) != buildv1.StatusReasonUnresolvableEnvironmentVariable ||
		!strings.Contains(err.Error(), "build arg S has a valueFrom, but the build pod has no ARCHWAY_STRATEGY_BUILD_ARG_0") {
		t.Errorf("buildArgs with valueFrom and no variable: %v", err)
	}
	if _, err := buildEnv(unresolved, none); statusReason(err) != buildv1.StatusReasonUnresolvableEnvironmentVariable {
		t.Errorf("buildEnv with valueFrom and no variable: %v", err)
	}
}

// TestValueFromResolved: env and buildArgs with a valueFrom take the
// values the kubelet put in the build container's variables named by
// their positions; the others keep theirs.
func TestValueFromResolved(t *testing.T) {
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}
	pod := map[string]string{"ARCHWAY_STRATEGY_BUILD_ARG_1": "s3cret", "ARCHWAY_STRATEGY_ENV_0": "from-configmap"}
	lookup := func(k string) (string, bool) { v, ok := pod[k]; return v, ok }
	args, err := buildArgs([]corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "TOKEN", ValueFrom: secret}}, lookup)
	if err != nil || !reflect.DeepEqual(args, map[string]string{"A": "1", "TOKEN": "s3cret"}) {
		t.Errorf("buildArgs = %v, %v", args, err)
	}
	env, err := buildEnv([]corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "mode"}}}, {Name: "B", Value: "2"}}, lookup)
	if err != nil || !reflect.DeepEqual(env, []string{"MODE=from-configmap", "B=2"}) {
		t.Errorf("buildEnv = %v, %v", env, err)
	}
}

func TestOutputReference(t *testing.T) {
	tests := []struct {
		out        buildv1.BuildOutput
		want       string
		wantReason buildv1.StatusReason
	}{
		{out: buildv1.BuildOutput{}, want: ""},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "r.example.com/app:v1-linux-arm64"}}, want: "r.example.com/app:v1-linux-arm64"},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "app:v1"}}, wantReason: buildv1.StatusReasonInvalidOutputReference},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "Not A Ref"}}, wantReason: buildv1.StatusReasonInvalidOutputReference},
	}
	for _, tt := range tests {
		got, err := outputReference(tt.out)
		if tt.wantReason != "" {
			if statusReason(err) != tt.wantReason {
				t.Errorf("outputReference(%+v) err = %v, want %s", tt.out.To, err, tt.wantReason)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("outputReference(%+v) = %q, %v", tt.out.To, got, err)
		}
	}
}

func TestTargetPlatform(t *testing.T) {
	b := &buildv1.Build{}
	if p, err := TargetPlatform(b); err != nil || p.String() != "" {
		t.Errorf("classic: %v %v", p, err)
	}
	b.Spec.Platforms = []string{"linux/arm64"}
	if p, err := TargetPlatform(b); err != nil || p.String() != "linux/arm64" {
		t.Errorf("one: %v %v", p, err)
	}
	b.Spec.Platforms = []string{"linux/arm64", "linux/amd64"}
	if _, err := TargetPlatform(b); err == nil {
		t.Error("two platforms accepted")
	}
}

func TestRunMounts(t *testing.T) {
	volumes := []buildv1.BuildVolume{
		{Name: "certs", Mounts: []buildv1.BuildVolumeMount{{DestinationPath: "/etc/pki/extra"}, {DestinationPath: "/certs"}}},
		{Name: "settings", Mounts: []buildv1.BuildVolumeMount{{DestinationPath: "/etc/app"}}},
	}
	want := []string{"/v/certs:/etc/pki/extra:ro", "/v/certs:/certs:ro", "/v/settings:/etc/app:ro"}
	if got := runMounts(volumes, "/v"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestImageLabelsRedactCredentials: the source-location label of an image
// built from a URI with credentials does not carry them.
func TestImageLabelsRedactCredentials(t *testing.T) {
	for uri, want := range map[string]string{
		"https://ada:s3cret-pw@git.example.com/app.git": "https://ada:redacted@git.example.com/app.git",
		"https://ghp_t0ken@github.com/org/app.git":      "https://redacted@github.com/org/app.git",
	} {
		b := &buildv1.Build{}
		b.Spec.Source = buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: uri}}
		if got := imageLabels(b, nil)[labelSourceLocation]; got != want {
			t.Errorf("label %s = %q, want %q", labelSourceLocation, got, want)
		}
	}
}

func TestLayerCacheRepository(t *testing.T) {
	arm64, _ := platform.Parse("linux/arm64/v8")
	const out = "registry.example.com/team/app:v1-linux-arm64"
	registry := buildv1.LayerCacheRegistry
	for _, tc := range []struct {
		name   string
		cache  *buildv1.LayerCache
		output string
		want   string
		err    string
	}{
		{name: "none", output: out},
		{name: "disabled", cache: &buildv1.LayerCache{Mode: buildv1.LayerCacheDisabled}, output: out},
		{name: "next to the output", cache: &buildv1.LayerCache{Mode: registry}, output: out,
			want: "registry.example.com/team/app-cache-linux-arm64"},
		{name: "named", cache: &buildv1.LayerCache{Mode: registry, Repository: "cache.example.com/app"}, output: out,
			want: "cache.example.com/app-linux-arm64"},
		{name: "named, no output", cache: &buildv1.LayerCache{Mode: registry, Repository: "cache.example.com/app"},
			want: "cache.example.com/app-linux-arm64"},
		{name: "no output to derive from", cache: &buildv1.LayerCache{Mode: registry}},
		{name: "a tag", cache: &buildv1.LayerCache{Mode: registry, Repository: "cache.example.com/app:v1"}, output: out,
			err: `spec.strategy.dockerStrategy.layerCache.repository: cache repository "cache.example.com/app:v1" has a tag or digest`},
	} {
		got, err := layerCacheRepository(tc.cache, tc.output, arm64)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestTrustedCAMounts: the bundle reaches both trust paths read-only, a
// build volume at one of them wins, and a missing bundle is an error that
// names mountTrustedCA.
func TestTrustedCAMounts(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trustedCAMounts(dir); err == nil || !strings.Contains(err.Error(), "mountTrustedCA") {
		t.Fatalf("no bundle: got %v, want an error naming mountTrustedCA", err)
	}
	bundle := filepath.Join(dir, TrustedCABundleFile)
	if err := os.WriteFile(bundle, []byte("pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := trustedCAMounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{bundle + ":/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem:ro", bundle + ":/etc/ssl/certs/ca-certificates.crt:ro"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	kept := withoutDestinations(got, []string{"/v/certs:/etc/ssl/certs/ca-certificates.crt/:ro"})
	if !reflect.DeepEqual(kept, want[:1]) {
		t.Fatalf("with a volume at the Debian path: got %q, want %q", kept, want[:1])
	}
}
