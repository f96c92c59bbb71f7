package build

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
)

// TestBuildTrustedCA: a Build with mountTrustedCA gets the configured
// trusted CA bundle's ConfigMap in each platform pod (and not in the
// manifest-list pod, which runs no step); one without does not; a missing
// ConfigMap, key or configuration fails the Build with
// MissingTrustedCABundle before any pod.
func TestBuildTrustedCA(t *testing.T) {
	t.Parallel()
	configured := func(c *configv1alpha1.BuildControllerConfig) {
		c.TrustedCA = &configv1alpha1.TrustedCAConfig{ConfigMapName: "cluster-ca"}
	}
	configMap := func(data map[string]string) step {
		return step{"the trusted CA bundle's ConfigMap", func(h *harness) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "cluster-ca",
				Labels: map[string]string{"config.openshift.io/inject-trusted-cabundle": "true"}}, Data: data}
			if err := k8s.Create(h.ctx, cm); err != nil {
				h.t.Fatal(err)
			}
		}}
	}
	bundle := map[string]string{configv1alpha1.DefaultTrustedCAKey: "-----BEGIN CERTIFICATE-----\n"}
	mountTrustedCA := func(on bool) func(*buildv1.Build) {
		return func(b *buildv1.Build) { b.Spec.MountTrustedCA = ptr.To(on) }
	}
	wantTrustedCA := func(mounted bool) step {
		return step{"the platform pods mount the bundle, the manifest-list pod does not", func(h *harness) {
			pods := h.waitPodNames(h.withManifestListPod([]string{h.platformPod(amd64), h.platformPod(arm64)})...)
			for name, pod := range pods {
				want := mounted && pod.Labels[buildv1.PodRoleLabel] == buildv1.PodRoleBuild
				i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "trusted-ca" })
				if (i >= 0) != want {
					h.t.Errorf("pod %s: trusted-ca volume %v, want %v", name, i >= 0, want)
					continue
				}
				if !want {
					continue
				}
				cm := pod.Spec.Volumes[i].ConfigMap
				if cm == nil || cm.Name != "cluster-ca" || len(cm.Items) != 1 || cm.Items[0].Key != configv1alpha1.DefaultTrustedCAKey ||
					cm.Items[0].Path != buildcontroller.TrustedCABundleFile || ptr.Deref(cm.Optional, false) {
					h.t.Errorf("pod %s: trusted-ca volume %+v", name, pod.Spec.Volumes[i])
				}
				c := pod.Spec.Containers[0]
				if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "trusted-ca" && m.MountPath == buildcontroller.TrustedCAMountDir && m.ReadOnly
				}) {
					h.t.Errorf("pod %s: mounts %+v", name, c.VolumeMounts)
				}
			}
		}}
	}
	cases := []struct {
		name   string
		config func(*configv1alpha1.BuildControllerConfig)
		steps  []step
	}{
		{
			name:   "mountTrustedCA: the platform pods mount the configured ConfigMap",
			config: configured,
			steps:  []step{configMap(bundle), createBuild(mountTrustedCA(true), amd64, arm64), wantTrustedCA(true)},
		},
		{
			name:   "mountTrustedCA false: no pod mounts it",
			config: configured,
			steps:  []step{configMap(bundle), createBuild(mountTrustedCA(false), amd64, arm64), wantTrustedCA(false)},
		},
		{
			name:   "the ConfigMap is missing: MissingTrustedCABundle, no pods",
			config: configured,
			steps: []step{
				createBuild(mountTrustedCA(true), amd64, arm64),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonMissingTrustedCABundle),
				wantMessage(`ConfigMap "cluster-ca"`, "does not exist", "mountTrustedCA"),
				wantNoPods(),
			},
		},
		{
			name:   "the ConfigMap lacks the key: MissingTrustedCABundle, no pods",
			config: configured,
			steps: []step{
				configMap(map[string]string{"other": "x"}),
				createBuild(mountTrustedCA(true), amd64, arm64),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonMissingTrustedCABundle),
				wantMessage("has no key ca-bundle.crt"),
				wantNoPods(),
			},
		},
		{
			name: "no bundle configured: MissingTrustedCABundle, no pods",
			steps: []step{
				createBuild(mountTrustedCA(true), amd64),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonMissingTrustedCABundle),
				wantMessage("build.trustedCA"),
				wantNoPods(),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "trustedca")
			h.cfg = testConfig(tc.config)
			h.ctrl = startController(t, h.ns, h.cfg)
			for _, s := range tc.steps {
				s.do(h)
				if t.Failed() {
					t.Fatalf("after step %q: %s", s.name, describeBuild(h))
				}
			}
		})
	}
}
