package controller

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

func testConfig(mut ...func(*configv1alpha1.BuildControllerConfig)) *configv1alpha1.BuildControllerConfig {
	cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{
		BuilderImage: "registry.example.com/archway/builder:v1",
	}}
	configv1alpha1.SetDefaults(cfg)
	for _, m := range mut {
		m(&cfg.Build)
	}
	return &cfg.Build
}

// podBuild decodes the BUILD environment variable of a pod.
func podBuild(t *testing.T, pod *corev1.Pod) *buildv1.Build {
	t.Helper()
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == buildv1.BuildEnv {
			b := &buildv1.Build{}
			if err := json.Unmarshal([]byte(e.Value), b); err != nil {
				t.Fatalf("BUILD is not a Build: %v", err)
			}
			return b
		}
	}
	t.Fatalf("pod %s has no BUILD", pod.Name)
	return nil
}

func env(pod *corev1.Pod, name string) string {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func mountPaths(pod *corev1.Pod) []string {
	var out []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		out = append(out, m.MountPath)
	}
	return out
}

func TestBuildPod(t *testing.T) {
	four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	tests := []struct {
		name      string
		build     *buildv1.Build
		cfg       *configv1alpha1.BuildControllerConfig
		platforms []string
		platform  string
		check     func(t *testing.T, pod *corev1.Pod, b *buildv1.Build)
	}{
		{
			name: "platform pod of a four-platform build", build: makeBuild("app").platforms(four...).allowFail("linux/s390x").obj(),
			cfg: testConfig(), platforms: four, platform: "linux/arm64",
			check: func(t *testing.T, pod *corev1.Pod, b *buildv1.Build) {
				want := map[string]string{buildv1.BuildLabel: "app", buildv1.PlatformLabel: "linux-arm64", buildv1.PodRoleLabel: "build"}
				if diff := cmp.Diff(want, pod.Labels); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
				if pod.Annotations[buildv1.PlatformAnnotation] != "linux/arm64" || pod.Annotations[buildv1.BuildAnnotation] != "app" {
					t.Errorf("annotations %v", pod.Annotations)
				}
				if diff := cmp.Diff(map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}, pod.Spec.NodeSelector); diff != "" {
					t.Errorf("node selector (-want +got):\n%s", diff)
				}
				ref := pod.OwnerReferences[0]
				if ref.Kind != "Build" || ref.Name != "app" || ref.UID != "app-uid" || !ptr.Deref(ref.Controller, false) {
					t.Errorf("owner %+v", ref)
				}
				c := pod.Spec.Containers[0]
				if c.Name != "docker-build" || c.Image != "registry.example.com/archway/builder:v1" ||
					strings.Join(c.Command, " ") != "builder docker-build --"+buildv1.RequireUserNamespaceFlag || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("container %+v", c)
				}
				pb := podBuild(t, pod)
				if diff := cmp.Diff([]string{"linux/arm64"}, pb.Spec.Platforms); diff != "" {
					t.Errorf("BUILD platforms (-want +got):\n%s", diff)
				}
				if pb.Spec.PlatformsAllowedToFail != nil {
					t.Errorf("BUILD allowed-to-fail %v, want none for a required platform", pb.Spec.PlatformsAllowedToFail)
				}
				if got := pb.Spec.Output.To.Name; got != "registry.example.com/team/app:v1-linux-arm64" {
					t.Errorf("BUILD output %q, want the per-platform tag", got)
				}
				if b.Spec.Output.To.Name != "registry.example.com/team/app:v1" {
					t.Errorf("the controller's Build was changed: %s", b.Spec.Output.To.Name)
				}
				if pod.Spec.ServiceAccountName != "builder" {
					t.Errorf("service account %q", pod.Spec.ServiceAccountName)
				}
			},
		},
		{
			name: "allowed-to-fail platform keeps its flag in BUILD", build: makeBuild("app").platforms(four...).allowFail("linux/s390x").obj(),
			cfg: testConfig(), platforms: four, platform: "linux/s390x",
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if got := podBuild(t, pod).Spec.PlatformsAllowedToFail; !cmp.Equal(got, []string{"linux/s390x"}) {
					t.Errorf("allowed-to-fail %v", got)
				}
			},
		},
		{
			name: "single platform pushes to the output itself", build: makeBuild("app").platforms("linux/arm64").obj(),
			cfg: testConfig(), platforms: []string{"linux/arm64"}, platform: "linux/arm64",
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if got := podBuild(t, pod).Spec.Output.To.Name; got != "registry.example.com/team/app:v1" {
					t.Errorf("output %q", got)
				}
			},
		},
		{
			name: "classic pod", build: makeBuild("app").obj(), cfg: testConfig(),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if pod.Name != "app-build" || pod.Labels[buildv1.PlatformLabel] != "" || pod.Annotations[buildv1.PlatformAnnotation] != "" {
					t.Errorf("classic pod %s labels %v annotations %v", pod.Name, pod.Labels, pod.Annotations)
				}
				if diff := cmp.Diff(map[string]string{"kubernetes.io/os": "linux"}, pod.Spec.NodeSelector); diff != "" {
					t.Errorf("node selector (-want +got):\n%s", diff)
				}
				pb := podBuild(t, pod)
				if len(pb.Spec.Platforms) != 0 || pb.Spec.Output.To.Name != "registry.example.com/team/app:v1" {
					t.Errorf("BUILD %+v", pb.Spec)
				}
			},
		},
		{
			name:  "archNodeSelector=false leaves the arch out",
			build: makeBuild("app").platforms(four...).obj(), platforms: four, platform: "linux/s390x",
			cfg: testConfig(func(c *configv1alpha1.BuildControllerConfig) { c.BuildOverrides.ArchNodeSelector = ptr.To(false) }),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if _, ok := pod.Spec.NodeSelector["kubernetes.io/arch"]; ok {
					t.Errorf("node selector %v has an arch", pod.Spec.NodeSelector)
				}
			},
		},
		{
			name:  "per-platform builder image",
			build: makeBuild("app").platforms(four...).obj(), platforms: four, platform: "linux/s390x",
			cfg: testConfig(func(c *configv1alpha1.BuildControllerConfig) {
				c.PlatformBuilderImages = []configv1alpha1.PlatformBuilderImage{{Platform: "linux/s390x", Image: "example.com/builder-s390x:1"}}
			}),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if got := pod.Spec.Containers[0].Image; got != "example.com/builder-s390x:1" {
					t.Errorf("image %q", got)
				}
			},
		},
		{
			name: "defaults and overrides with OpenShift's rules",
			build: func() *buildv1.Build {
				b := makeBuild("app").platforms(four...).obj()
				b.Labels = map[string]string{buildv1.BuildConfigLabel: "app"}
				b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{Env: []corev1.EnvVar{{Name: "A", Value: "build"}}}
				b.Spec.Output.ImageLabels = []buildv1.ImageLabel{{Name: "vendor", Value: "me"}, {Name: "built-by", Value: "me"}}
				b.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
				b.Spec.CompletionDeadlineSeconds = ptr.To[int64](600)
				return b
			}(),
			platforms: four, platform: "linux/amd64",
			cfg: testConfig(func(c *configv1alpha1.BuildControllerConfig) {
				c.BuildDefaults.Env = []corev1.EnvVar{{Name: "A", Value: "default"}, {Name: "B", Value: "default"}}
				c.BuildDefaults.Labels = map[string]string{"team": "x", buildv1.BuildConfigLabel: "not-this"}
				c.BuildDefaults.Annotations = map[string]string{"d": "1", "o": "default"}
				c.BuildDefaults.NodeSelector = map[string]string{"pool": "default"}
				c.BuildDefaults.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
				}
				c.BuildDefaults.ImageLabels = []buildv1.ImageLabel{{Name: "vendor", Value: "default"}, {Name: "license", Value: "default"}}
				c.BuildOverrides.ImageLabels = []buildv1.ImageLabel{{Name: "built-by", Value: "archway"}}
				c.BuildOverrides.Labels = map[string]string{"billing": "builds"}
				c.BuildOverrides.Annotations = map[string]string{"o": "override"}
				c.BuildOverrides.NodeSelector = map[string]string{"zone": "z1"}
				c.BuildOverrides.Tolerations = []corev1.Toleration{{Key: "builds", Operator: corev1.TolerationOpExists}}
				c.BuildOverrides.ForcePull = true
			}),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if pod.Labels["team"] != "x" || pod.Labels["billing"] != "builds" || pod.Labels[buildv1.BuildConfigLabel] != "app" {
					t.Errorf("labels %v", pod.Labels)
				}
				if pod.Annotations["d"] != "1" || pod.Annotations["o"] != "override" {
					t.Errorf("annotations %v", pod.Annotations)
				}
				want := map[string]string{"pool": "default", "zone": "z1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
				if diff := cmp.Diff(want, pod.Spec.NodeSelector); diff != "" {
					t.Errorf("node selector (-want +got):\n%s", diff)
				}
				if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Key != "builds" {
					t.Errorf("tolerations %v", pod.Spec.Tolerations)
				}
				r := pod.Spec.Containers[0].Resources
				if r.Limits.Memory().String() != "1Gi" || r.Requests.Memory().String() != "1Gi" || r.Requests.Cpu().String() != "500m" {
					t.Errorf("resources %v", r)
				}
				if ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0) != 600 {
					t.Errorf("deadline %v", pod.Spec.ActiveDeadlineSeconds)
				}
				pb := podBuild(t, pod)
				ds := pb.Spec.Strategy.DockerStrategy
				if diff := cmp.Diff([]corev1.EnvVar{{Name: "A", Value: "build"}, {Name: "B", Value: "default"}}, ds.Env); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
				if !ds.ForcePull {
					t.Errorf("forcePull not forced")
				}
				wantLabels := []buildv1.ImageLabel{{Name: "vendor", Value: "me"}, {Name: "built-by", Value: "archway"}, {Name: "license", Value: "default"}}
				if diff := cmp.Diff(wantLabels, pb.Spec.Output.ImageLabels); diff != "" {
					t.Errorf("image labels (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "a Source build's pod: defaults and overrides, pull secret, volumes and valueFrom env of its sourceStrategy",
			build: func() *buildv1.Build {
				b := makeBuild("app").platforms(four...).source("r/builder:1").obj()
				ss := b.Spec.Strategy.SourceStrategy
				ss.Env = []corev1.EnvVar{{Name: "A", Value: "build"}, {Name: "S", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
				ss.PullSecret = &corev1.LocalObjectReference{Name: "builder-pull"}
				ss.Incremental = ptr.To(true)
				b.Annotations = map[string]string{buildv1.IncrementalFromAnnotation: "registry.example.com/elsewhere:v1"}
				ss.Volumes = []buildv1.BuildVolume{{Name: "cache", Source: buildv1.BuildVolumeSource{Type: buildv1.BuildVolumeSourceTypeConfigMap,
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
					Mounts: []buildv1.BuildVolumeMount{{DestinationPath: "/opt/cache"}}}}
				return b
			}(),
			platforms: four, platform: "linux/s390x",
			cfg: testConfig(func(c *configv1alpha1.BuildControllerConfig) {
				c.BuildDefaults.Env = []corev1.EnvVar{{Name: "A", Value: "default"}, {Name: "B", Value: "default"}}
				c.BuildOverrides.ForcePull = true
				c.LayerCache = configv1alpha1.LayerCacheConfig{Mode: buildv1.LayerCacheRegistry}
			}),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				pb := podBuild(t, pod)
				if got := pb.Annotations[buildv1.IncrementalFromAnnotation]; got != "registry.example.com/team/app:v1" {
					t.Errorf("incremental from %q, want the output's index (the Build's own annotation has no effect)", got)
				}
				if pb.Spec.Strategy.DockerStrategy != nil {
					t.Errorf("a Source build's BUILD has a dockerStrategy: %+v", pb.Spec.Strategy.DockerStrategy)
				}
				ss := pb.Spec.Strategy.SourceStrategy
				if diff := cmp.Diff([]string{"A=build", "S=", "B=default"}, envNames(ss.Env)); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
				if !ss.ForcePull {
					t.Error("forcePull not forced")
				}
				if ss.LayerCache == nil || ss.LayerCache.Mode != buildv1.LayerCacheRegistry {
					t.Errorf("layer cache %+v, want the configured default", ss.LayerCache)
				}
				c := pod.Spec.Containers[0]
				var found []string
				for _, e := range c.Env {
					if e.Name == buildv1.PullDockerConfigPathEnv || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil) {
						found = append(found, e.Name)
					}
				}
				if diff := cmp.Diff([]string{buildv1.StrategyEnvValueFromPrefix + "1", buildv1.PullDockerConfigPathEnv}, found); diff != "" {
					t.Errorf("valueFrom env and pull secret path (-want +got):\n%s", diff)
				}
				var vols []string
				for _, v := range pod.Spec.Volumes {
					vols = append(vols, v.Name)
				}
				if !slices.Contains(vols, "pull-secret") || !slices.Contains(vols, "build-volume-0") {
					t.Errorf("volumes %v, want the pull secret and the build volume", vols)
				}
			},
		},
		{
			name:  "an empty build node selector keeps the default away; only kubernetes.io/os lets it in",
			build: makeBuild("app").nodeSelector().obj(),
			cfg: testConfig(func(c *configv1alpha1.BuildControllerConfig) {
				c.BuildDefaults.NodeSelector = map[string]string{"pool": "default"}
			}),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if _, ok := pod.Spec.NodeSelector["pool"]; ok {
					t.Errorf("default applied over an empty selector: %v", pod.Spec.NodeSelector)
				}
				b := makeBuild("app").nodeSelector("kubernetes.io/os", "linux").obj()
				if got := NodeSelector(b, testConfig(func(c *configv1alpha1.BuildControllerConfig) {
					c.BuildDefaults.NodeSelector = map[string]string{"pool": "default"}
				})); got["pool"] != "default" {
					t.Errorf("default not applied over an os-only selector: %v", got)
				}
			},
		},
		{
			name: "secrets mounted where OpenShift mounts them",
			build: func() *buildv1.Build {
				b := makeBuild("app").pushSecret("push").obj()
				b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{PullSecret: &corev1.LocalObjectReference{Name: "pull"}}
				b.Spec.Source.SourceSecret = &corev1.LocalObjectReference{Name: "git"}
				b.Spec.Source.Secrets = []buildv1.SecretBuildSource{{Secret: corev1.LocalObjectReference{Name: "token"}}}
				return b
			}(),
			cfg: testConfig(),
			check: func(t *testing.T, pod *corev1.Pod, _ *buildv1.Build) {
				if env(pod, "PUSH_DOCKERCFG_PATH") != PushSecretMountPath || env(pod, "PULL_DOCKERCFG_PATH") != PullSecretMountPath ||
					env(pod, SourceSecretPathEnv) != SourceSecretMountPath {
					t.Errorf("env %v", pod.Spec.Containers[0].Env)
				}
				want := []string{PushSecretMountPath, PullSecretMountPath, SourceSecretMountPath, InputSecretMountDir + "/token", BuildWorkDir, ContainerStorageDir}
				if diff := cmp.Diff(want, mountPaths(pod)); diff != "" {
					t.Errorf("mounts (-want +got):\n%s", diff)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, err := PodPlan{Config: tt.cfg, Platforms: tt.platforms}.BuildPod(tt.build, tt.platform)
			if err != nil {
				t.Fatalf("BuildPod: %v", err)
			}
			tt.check(t, pod, tt.build)
		})
	}
}

func TestManifestListPod(t *testing.T) {
	four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	b := makeBuild("app").nodeSelector("pool", "b").pushSecret("push").allowFail("linux/s390x").obj()
	pl := PodPlan{Config: testConfig(), Platforms: four}
	pod, err := pl.ManifestListPod(b)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "app-manifest-list" || pod.Labels[buildv1.PodRoleLabel] != "manifest-list" || pod.Labels[buildv1.PlatformLabel] != "" {
		t.Errorf("pod %s labels %v", pod.Name, pod.Labels)
	}
	// Its wait is bounded as the platform pods are: build.activeDeadlineSeconds here.
	if strings.Join(pod.Spec.Containers[0].Command, " ") != "builder manifest-list --wait-timeout=14400s" || RemovesTags(pod) {
		t.Errorf("command %v", pod.Spec.Containers[0].Command)
	}
	b.Spec.CompletionDeadlineSeconds = ptr.To[int64](600)
	if pod, err := pl.ManifestListPod(b); err != nil || strings.Join(pod.Spec.Containers[0].Command, " ") != "builder manifest-list --wait-timeout=600s" {
		t.Errorf("with completionDeadlineSeconds 600: command %v (%v)", pod.Spec.Containers[0].Command, err)
	}
	if pod, err := pl.RemoveTagsPod(b); err != nil || !RemovesTags(pod) || pod.Name != "app-manifest-list" {
		t.Errorf("the pod that removes the tags: %s command %v (%v)", pod.Name, pod.Spec.Containers[0].Command, err)
	}
	b.Spec.CompletionDeadlineSeconds = nil
	if diff := cmp.Diff(map[string]string{"pool": "b", "kubernetes.io/os": "linux"}, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	pb := podBuild(t, pod)
	if diff := cmp.Diff(four, pb.Spec.Platforms); diff != "" {
		t.Errorf("BUILD platforms are the resolved ones (-want +got):\n%s", diff)
	}
	if pb.Spec.Output.To.Name != "registry.example.com/team/app:v1" || env(pod, "PUSH_DOCKERCFG_PATH") == "" {
		t.Errorf("output %s, push env %q", pb.Spec.Output.To.Name, env(pod, "PUSH_DOCKERCFG_PATH"))
	}
	if !pl.ManifestList(b) || pl.ManifestList(makeBuild("x").noOutput().obj()) ||
		(PodPlan{Config: testConfig(), Platforms: four[:1]}).ManifestList(b) ||
		(PodPlan{Config: testConfig(func(c *configv1alpha1.BuildControllerConfig) { c.BuildOverrides.ManifestList = ptr.To(false) }), Platforms: four}).ManifestList(b) {
		t.Errorf("ManifestList: want true only with an output, several platforms and manifestList on")
	}
}

func TestBuildFailure(t *testing.T) {
	tests := []struct {
		name  string
		build *buildv1.Build
		want  buildv1.StatusReason
	}{
		{"fine", makeBuild("a").obj(), ""},
		{"no output is fine", makeBuild("a").noOutput().obj(), ""},
		{"source strategy", makeBuild("a").source("r/builder:1").obj(), ""},
		{"source strategy without sourceStrategy", func() *buildv1.Build {
			b := makeBuild("a").obj()
			b.Spec.Strategy.Type = buildv1.SourceBuildStrategyType
			return b
		}(), buildv1.StatusReasonUnsupportedBuildStrategy},
		{"custom strategy", func() *buildv1.Build {
			b := makeBuild("a").obj()
			b.Spec.Strategy.Type = "Custom"
			return b
		}(), buildv1.StatusReasonUnsupportedBuildStrategy},
		{"output by digest", makeBuild("a").output("registry.example.com/a@sha256:" + strings.Repeat("0", 64)).obj(), buildv1.StatusReasonInvalidOutputReference},
		{"output not a reference", makeBuild("a").output("Not A Reference").obj(), buildv1.StatusReasonInvalidOutputReference},
	}
	for _, tt := range tests {
		got := BuildFailure(tt.build)
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("%s: unexpected %+v", tt.name, got)
		case tt.want != "" && (got == nil || got.Reason != tt.want):
			t.Errorf("%s: got %+v, want %s", tt.name, got, tt.want)
		}
	}
}

// TestBuildPodAllowsFileGitURIsOnlyWhenConfigured: the builder lets a Git
// source name a local repository only when the configuration says so.
func TestBuildPodAllowsFileGitURIsOnlyWhenConfigured(t *testing.T) {
	for _, allow := range []bool{false, true} {
		cfg := testConfig(func(c *configv1alpha1.BuildControllerConfig) { c.AllowFileGitURIs = allow })
		four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
		pod, err := PodPlan{Config: cfg, Platforms: four}.BuildPod(makeBuild("app").obj(), "linux/arm64")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(strings.Join(pod.Spec.Containers[0].Command, " "), "--"+AllowFileGitURIsFlag); got != allow {
			t.Errorf("allowFileGitURIs %v: command %v", allow, pod.Spec.Containers[0].Command)
		}
	}
}

// TestBuildPodValueFrom: a Docker strategy's env and buildArgs with a
// valueFrom (and the configured default env with one) become the build
// container's own variables with the same valueFrom, named by position, so
// the kubelet resolves them and the pod spec holds no Secret value; BUILD
// keeps the entries as the Build has them.
func TestBuildPodValueFrom(t *testing.T) {
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}
	configMap := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}
	b := makeBuild("app").obj()
	b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{
		Env:       []corev1.EnvVar{{Name: "PLAIN", Value: "x"}, {Name: "MODE", ValueFrom: configMap}},
		BuildArgs: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: secret}},
	}
	cfg := testConfig(func(c *configv1alpha1.BuildControllerConfig) {
		c.BuildDefaults.Env = []corev1.EnvVar{{Name: "FROM_DEFAULTS", ValueFrom: secret}}
	})
	pod, err := PodPlan{Config: cfg}.BuildPod(b, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*corev1.EnvVarSource{}
	for _, e := range pod.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "ARCHWAY_STRATEGY_") {
			got[e.Name] = e.ValueFrom
			if e.Value != "" {
				t.Errorf("%s has a value %q: the controller must not resolve it", e.Name, e.Value)
			}
		}
	}
	want := map[string]*corev1.EnvVarSource{
		buildv1.StrategyEnvValueFromPrefix + "1":      configMap,
		buildv1.StrategyEnvValueFromPrefix + "2":      secret,
		buildv1.StrategyBuildArgValueFromPrefix + "0": secret,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("valueFrom variables (-want +got):\n%s", diff)
	}
	pb := podBuild(t, pod)
	if ds := pb.Spec.Strategy.DockerStrategy; ds.Env[1].ValueFrom == nil || ds.Env[2].Name != "FROM_DEFAULTS" || ds.BuildArgs[0].ValueFrom == nil {
		t.Errorf("BUILD's strategy %+v, want the entries as the Build has them, defaults appended", ds)
	}
}

// TestBinaryInputReader: the one build pod of a Build without a
// manifest-list pod is told it reads the binary input alone (and removes
// its tag); a platform's pod of a multi-platform Build and the
// manifest-list pod are not, whatever the stored Build's annotations say.
func TestBinaryInputReader(t *testing.T) {
	four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	b := makeBuild("app").obj()
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{
		Artifact: "registry.example.com/team/app@sha256:" + strings.Repeat("ab", 32)}}
	forged := b.DeepCopy()
	forged.Annotations = map[string]string{buildv1.BinaryInputReaderAnnotation: buildv1.BinaryInputOnlyReader}
	reader := func(pod *corev1.Pod, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return podBuild(t, pod).Annotations[buildv1.BinaryInputReaderAnnotation]
	}
	if got := reader(PodPlan{Config: testConfig()}.BuildPod(b, "")); got != buildv1.BinaryInputOnlyReader {
		t.Errorf("classic build pod: %q, want %q", got, buildv1.BinaryInputOnlyReader)
	}
	if got := reader(PodPlan{Config: testConfig(), Platforms: four[:1]}.BuildPod(b, four[0])); got != buildv1.BinaryInputOnlyReader {
		t.Errorf("the pod of a one-platform Build: %q, want %q", got, buildv1.BinaryInputOnlyReader)
	}
	pl := PodPlan{Config: testConfig(), Platforms: four}
	if got := reader(pl.BuildPod(forged, four[1])); got != "" {
		t.Errorf("a platform's pod of a four-platform Build: %q, want none", got)
	}
	if got := reader(pl.ManifestListPod(forged)); got != "" {
		t.Errorf("the manifest-list pod: %q, want none", got)
	}
	if got := reader(PodPlan{Config: testConfig()}.BuildPod(makeBuild("git").obj(), "")); got != "" {
		t.Errorf("a build without a binary input: %q, want none", got)
	}
}

// armAndManifestListPods are b's linux/arm64 pod and manifest-list pod
// as pl makes them.
func armAndManifestListPods(t *testing.T, pl PodPlan, b *buildv1.Build) []*corev1.Pod {
	t.Helper()
	bp, err := pl.BuildPod(b, "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	ml, err := pl.ManifestListPod(b)
	if err != nil {
		t.Fatal(err)
	}
	return []*corev1.Pod{bp, ml}
}

// TestPodsNameInsecureRegistries: the plain-HTTP registries of the
// configuration reach the builder of every pod of a build, the platform
// pods and the manifest-list pod alike.
func TestPodsNameInsecureRegistries(t *testing.T) {
	pl := PodPlan{Config: testConfig(), Platforms: []string{"linux/amd64", "linux/arm64"}, InsecureRegistries: []string{"registry.lan:5000", "10.0.0.7"}}
	b := makeBuild("app").obj()
	b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.lan:5000/team/app:v1"}
	for _, pod := range armAndManifestListPods(t, pl, b) {
		cmd := strings.Join(pod.Spec.Containers[0].Command, " ")
		for _, want := range []string{"--insecure-registry=registry.lan:5000", "--insecure-registry=10.0.0.7"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("pod %s: command %q lacks %s", pod.Name, cmd, want)
			}
		}
	}
}

// TestPodsCarryClusterRegistryCAs: the cluster's per-registry CAs reach
// every pod of a build, the platform pods and the manifest-list pod alike,
// in the pod's own annotations, mounted with the downward API as
// certs.d/<host>/ca.crt where $ARCHWAY_REGISTRY_CERT_DIR says; a custom
// pod's CA ConfigMap (RegistryCAs) takes their place.
func TestPodsCarryClusterRegistryCAs(t *testing.T) {
	cas := map[string][]byte{"registry.lan:5000": []byte("lan CA"), "image-registry.openshift-image-registry.svc:5000": []byte("service CA")}
	pl := PodPlan{Config: testConfig(), Platforms: []string{"linux/amd64", "linux/arm64"}, ClusterRegistryCAs: cas}
	b := makeBuild("app").obj()
	for _, pod := range armAndManifestListPods(t, pl, b) {
		files := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			if v.Name != "registry-cas" || v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].DownwardAPI == nil {
				continue
			}
			for _, it := range v.Projected.Sources[0].DownwardAPI.Items {
				key := strings.TrimSuffix(strings.TrimPrefix(it.FieldRef.FieldPath, "metadata.annotations['"), "']")
				files[it.Path] = pod.Annotations[key]
			}
		}
		want := map[string]string{"certs.d/registry.lan:5000/ca.crt": "lan CA", "certs.d/image-registry.openshift-image-registry.svc:5000/ca.crt": "service CA"}
		if !maps.Equal(files, want) {
			t.Errorf("pod %s: registry CA files %v, want %v", pod.Name, files, want)
		}
		if got := env(pod, buildv1.RegistryCertDirEnv); got != RegistryCAsMountDir+"/certs.d" {
			t.Errorf("pod %s: $%s = %q", pod.Name, buildv1.RegistryCertDirEnv, got)
		}
	}
	pl.RegistryCAs = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-ca"}}
	bp, err := pl.BuildPod(b, "linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	for k := range bp.Annotations {
		if strings.HasPrefix(k, RegistryCAAnnotationPrefix) {
			t.Errorf("with a CA ConfigMap the pod still carries annotation %s", k)
		}
	}
}

func TestAccountPullSecrets(t *testing.T) {
	four := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	pl := PodPlan{Config: testConfig(), Platforms: four, AccountPullSecrets: []string{"a", "b"}}
	mounted := func(pod *corev1.Pod) []string {
		var names []string
		for _, v := range pod.Spec.Volumes {
			if v.Projected == nil || v.Name != "account-pull-secrets" {
				continue
			}
			for _, s := range v.Projected.Sources {
				if s.Secret == nil || !ptr.Deref(s.Secret.Optional, false) || len(s.Secret.Items) != 2 {
					t.Errorf("source %+v: want an optional secret with its two docker config keys", s)
					continue
				}
				names = append(names, s.Secret.Name+"="+s.Secret.Items[0].Path)
			}
		}
		return names
	}
	for _, tc := range []struct {
		name string
		b    *buildv1.Build
		want []string
	}{
		{"no push or pull secret", makeBuild("app").obj(), []string{"a=0/.dockerconfigjson", "b=1/.dockerconfigjson"}},
		{"a push secret, no pull secret", makeBuild("app").pushSecret("push").obj(), []string{"a=0/.dockerconfigjson", "b=1/.dockerconfigjson"}},
	} {
		pod, err := pl.BuildPod(tc.b, "linux/arm64")
		if err != nil {
			t.Fatal(err)
		}
		if got := mounted(pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: mounted %v, want %v", tc.name, got, tc.want)
		}
		ml, err := pl.ManifestListPod(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := mounted(ml); !slices.Equal(got, tc.want) {
			t.Errorf("%s: the manifest-list pod mounted %v, want %v", tc.name, got, tc.want)
		}
	}
	both := makeBuild("app").pushSecret("push").obj()
	both.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{PullSecret: &corev1.LocalObjectReference{Name: "pull"}}
	if pod, err := pl.BuildPod(both, "linux/arm64"); err != nil || len(mounted(pod)) != 0 {
		t.Errorf("push and pull secrets named: mounted %v (%v), want none", mounted(pod), err)
	}
}

// envNames is env as NAME=value, for comparing.
func envNames(env []corev1.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}
