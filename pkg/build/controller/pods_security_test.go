package controller

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

// TestBuildPodSecurity checks the isolation of build pods per
// build.podSecurity: unprivileged in a user namespace by default,
// privileged only when configured, and marked either way.
func TestBuildPodSecurity(t *testing.T) {
	for _, tt := range []struct {
		name           string
		mode           configv1alpha1.PodSecurity
		wantPrivileged bool
	}{
		{name: "default is unprivileged", mode: configv1alpha1.PodSecurityUnprivileged},
		{name: "privileged is an explicit opt-in", mode: configv1alpha1.PodSecurityPrivileged, wantPrivileged: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(func(c *configv1alpha1.BuildControllerConfig) { c.PodSecurity = tt.mode })
			pod, err := PodPlan{Config: cfg, Platforms: []string{"linux/arm64"}}.BuildPod(makeBuild("app").obj(), "linux/arm64")
			if err != nil {
				t.Fatal(err)
			}
			sc := pod.Spec.Containers[0].SecurityContext
			if got := ptr.Deref(sc.Privileged, false); got != tt.wantPrivileged {
				t.Errorf("privileged = %v, want %v", got, tt.wantPrivileged)
			}
			if got := pod.Annotations[PodSecurityAnnotation]; got != string(tt.mode) {
				t.Errorf("annotation %s = %q, want %q", PodSecurityAnnotation, got, tt.mode)
			}
			// The builder refuses to run unprivileged outside a user
			// namespace only when told to.
			checks := slices.Contains(pod.Spec.Containers[0].Command, "--"+buildv1.RequireUserNamespaceFlag)
			if checks == tt.wantPrivileged {
				t.Errorf("command %q: the user-namespace check is on = %v, want %v", pod.Spec.Containers[0].Command, checks, !tt.wantPrivileged)
			}
			if tt.wantPrivileged {
				if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
					t.Errorf("a privileged pod cannot be in a user namespace")
				}
				return
			}
			if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
				t.Errorf("hostUsers = %v, want false (a user namespace)", pod.Spec.HostUsers)
			}
			if psc := pod.Spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context %+v, want seccomp RuntimeDefault", psc)
			}
			if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
				t.Errorf("readOnlyRootFilesystem unset: the builder writes only to its emptyDirs")
			}
			want := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: BuildCapabilities}
			if diff := cmp.Diff(want, sc.Capabilities); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildPodBounds(t *testing.T) {
	cfg := testConfig(func(c *configv1alpha1.BuildControllerConfig) {
		c.ActiveDeadlineSeconds = ptr.To[int64](600)
		c.WorkDirSizeLimit = ptr.To(resource.MustParse("1Gi"))
		c.StorageSizeLimit = ptr.To(resource.MustParse("5Gi"))
	})
	pl := PodPlan{Config: cfg}
	pod, err := pl.BuildPod(makeBuild("app").obj(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0); got != 600 {
		t.Errorf("activeDeadlineSeconds = %d, want the configured 600 when the Build sets none", got)
	}
	limits := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			limits[v.Name] = v.EmptyDir.SizeLimit.String()
		}
	}
	if diff := cmp.Diff(map[string]string{"buildworkdir": "1Gi", "container-storage-root": "5Gi"}, limits); diff != "" {
		t.Errorf("emptyDir size limits (-want +got):\n%s", diff)
	}
	b := makeBuild("app").obj()
	b.Spec.CompletionDeadlineSeconds = ptr.To[int64](30)
	if pod, err = pl.BuildPod(b, ""); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0); got != 30 {
		t.Errorf("activeDeadlineSeconds = %d, want the Build's completionDeadlineSeconds 30", got)
	}
}

func TestManifestListPodHasNoCapabilities(t *testing.T) {
	pod, err := PodPlan{Config: testConfig(), Platforms: []string{"linux/amd64", "linux/arm64"}}.ManifestListPod(makeBuild("app").obj())
	if err != nil {
		t.Fatal(err)
	}
	sc := pod.Spec.Containers[0].SecurityContext
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers || sc == nil || sc.Capabilities == nil ||
		len(sc.Capabilities.Add) != 0 || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Errorf("manifest-list pod: hostUsers %v, security context %+v", pod.Spec.HostUsers, sc)
	}
}
