package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	securityv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/test/bed"
)

// rendered is what a kustomization builds, split by kind.
type rendered struct {
	sccs         map[string]*securityv1.SecurityContextConstraints
	daemonSets   []*appsv1.DaemonSet
	clusterRoles map[string]*rbacv1.ClusterRole
	bindings     []rbacBinding
}

// rbacBinding is a RoleBinding (namespace set) or ClusterRoleBinding.
type rbacBinding struct {
	namespace string
	roleRef   rbacv1.RoleRef
	subjects  []rbacv1.Subject
}

// kustomize is manifests/dir as kubectl kustomize (the bed's kubectl)
// builds it.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	built, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(bed.RepoRoot(), "manifests", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/%s: %v", dir, stderrOf(err))
	}
	return built
}

// render builds a kustomization under manifests/ with kubectl kustomize
// and decodes the kinds the SCC checks need, strictly: a field the
// SecurityContextConstraints type of github.com/openshift/api does not
// have fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	built := kustomize(t, dir)
	out := &rendered{sccs: map[string]*securityv1.SecurityContextConstraints{}, clusterRoles: map[string]*rbacv1.ClusterRole{}}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(built)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "SecurityContextConstraints":
			scc := &securityv1.SecurityContextConstraints{}
			if err := yaml.UnmarshalStrict(doc, scc); err != nil {
				t.Fatalf("manifests/%s: a SecurityContextConstraints that is not openshift/api's: %v", dir, err)
			}
			out.sccs[scc.Name] = scc
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			if err := yaml.UnmarshalStrict(doc, ds); err != nil {
				t.Fatal(err)
			}
			out.daemonSets = append(out.daemonSets, ds)
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc, r); err != nil {
				t.Fatal(err)
			}
			out.clusterRoles[r.Name] = r
		case "ClusterRoleBinding":
			rb := &rbacv1.ClusterRoleBinding{}
			if err := yaml.UnmarshalStrict(doc, rb); err != nil {
				t.Fatal(err)
			}
			out.bindings = append(out.bindings, rbacBinding{roleRef: rb.RoleRef, subjects: rb.Subjects})
		case "RoleBinding":
			rb := &rbacv1.RoleBinding{}
			if err := yaml.UnmarshalStrict(doc, rb); err != nil {
				t.Fatal(err)
			}
			out.bindings = append(out.bindings, rbacBinding{namespace: rb.Namespace, roleRef: rb.RoleRef, subjects: rb.Subjects})
		}
	}
}

// sccUsers are the service accounts ("namespace/name") the rendered RBAC
// lets use an SCC, with the namespace the grant holds in ("" for every
// namespace).
func (r *rendered) sccUsers(scc string) map[string]string {
	users := map[string]string{}
	for _, b := range r.bindings {
		role, ok := r.clusterRoles[b.roleRef.Name]
		if !ok || b.roleRef.Kind != "ClusterRole" {
			continue
		}
		grants := slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool {
			return slices.Contains(rule.APIGroups, securityv1.GroupName) && slices.Contains(rule.Resources, "securitycontextconstraints") &&
				slices.Contains(rule.Verbs, "use") && slices.Contains(rule.ResourceNames, scc)
		})
		if !grants {
			continue
		}
		for _, s := range b.subjects {
			users[s.Kind+" "+s.Namespace+"/"+s.Name] = b.namespace
		}
	}
	return users
}

// sccViolations judges a pod, as the apiserver stored it, by an SCC's
// rules as OpenShift's SCC admission applies them (the fields of
// github.com/openshift/api's SecurityContextConstraints): it returns what
// the SCC does not allow, none when it admits the pod. Strategies that
// assign a value the pod leaves unset (seLinuxContext MustRunAs,
// runAsUser MustRunAsRange) admit an unset value.
func sccViolations(scc *securityv1.SecurityContextConstraints, pod *corev1.Pod) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	spec := pod.Spec
	if spec.HostNetwork && !scc.AllowHostNetwork {
		bad("hostNetwork")
	}
	if spec.HostPID && !scc.AllowHostPID {
		bad("hostPID")
	}
	if spec.HostIPC && !scc.AllowHostIPC {
		bad("hostIPC")
	}
	if scc.UserNamespaceLevel == securityv1.NamespaceLevelRequirePod && ptr.Deref(spec.HostUsers, true) {
		bad("hostUsers is not false (userNamespaceLevel RequirePodLevel)")
	}
	volumes := sets.New[securityv1.FSType](scc.Volumes...)
	for _, vol := range spec.Volumes {
		kind := volumeKind(vol)
		if kind == securityv1.FSTypeHostPath && !scc.AllowHostDirVolumePlugin {
			bad("volume %s: hostPath", vol.Name)
		}
		if !volumes.Has(securityv1.FSTypeAll) && !volumes.Has(kind) {
			bad("volume %s: kind %s is not in volumes", vol.Name, kind)
		}
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if scc.SELinuxContext.Type == securityv1.SELinuxStrategyMustRunAs && scc.SELinuxContext.SELinuxOptions == nil && psc.SELinuxOptions != nil && psc.SELinuxOptions.Type != "" {
		bad("pod SELinux type %q (seLinuxContext MustRunAs assigns the namespace's)", psc.SELinuxOptions.Type)
	}
	for _, sysctl := range psc.Sysctls {
		if !slices.Contains(scc.AllowedUnsafeSysctls, sysctl.Name) {
			bad("sysctl %s", sysctl.Name)
		}
	}
	allowedAdd := sets.New(scc.AllowedCapabilities...).Insert(scc.DefaultAddCapabilities...)
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 && !scc.AllowHostPorts {
				bad("container %s: hostPort %d", c.Name, p.HostPort)
			}
		}
		if ptr.Deref(sc.Privileged, false) && !scc.AllowPrivilegedContainer {
			bad("container %s: privileged", c.Name)
		}
		caps := sc.Capabilities
		if caps == nil {
			caps = &corev1.Capabilities{}
		}
		if !allowedAdd.Has(securityv1.AllowAllCapabilities) {
			for _, add := range caps.Add {
				if !allowedAdd.Has(add) {
					bad("container %s: capability %s is not in allowedCapabilities", c.Name, add)
				}
			}
		}
		drops := sets.New(caps.Drop...)
		for _, req := range scc.RequiredDropCapabilities {
			if !drops.Has(req) && !drops.Has("ALL") {
				bad("container %s: does not drop %s (requiredDropCapabilities)", c.Name, req)
			}
		}
		if !ptr.Deref(scc.AllowPrivilegeEscalation, true) && ptr.Deref(sc.AllowPrivilegeEscalation, true) {
			bad("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if scc.ReadOnlyRootFilesystem && sc.ReadOnlyRootFilesystem != nil && !*sc.ReadOnlyRootFilesystem {
			bad("container %s: readOnlyRootFilesystem false", c.Name)
		}
		uid := sc.RunAsUser
		if uid == nil {
			uid = psc.RunAsUser
		}
		switch scc.RunAsUser.Type {
		case securityv1.RunAsUserStrategyMustRunAsNonRoot:
			if (uid != nil && *uid == 0) || (uid == nil && !ptr.Deref(cmpOr(sc.RunAsNonRoot, psc.RunAsNonRoot), false)) {
				bad("container %s: may run as root (runAsUser MustRunAsNonRoot)", c.Name)
			}
		case securityv1.RunAsUserStrategyMustRunAs:
			if uid == nil || scc.RunAsUser.UID == nil || *uid != *scc.RunAsUser.UID {
				bad("container %s: runAsUser is not the SCC's uid", c.Name)
			}
		case securityv1.RunAsUserStrategyMustRunAsRange:
			if uid != nil && scc.RunAsUser.UIDRangeMin != nil && (*uid < *scc.RunAsUser.UIDRangeMin || *uid > *scc.RunAsUser.UIDRangeMax) {
				bad("container %s: runAsUser %d outside the SCC's range", c.Name, *uid)
			}
		}
		if len(scc.SeccompProfiles) > 0 && !slices.Contains(scc.SeccompProfiles, "*") {
			profile := sc.SeccompProfile
			if profile == nil {
				profile = psc.SeccompProfile
			}
			if !slices.Contains(scc.SeccompProfiles, seccompName(profile)) {
				bad("container %s: seccomp profile %q is not in seccompProfiles", c.Name, seccompName(profile))
			}
		}
	}
	return v
}

func cmpOr(a, b *bool) *bool {
	if a != nil {
		return a
	}
	return b
}

// seccompName is a seccomp profile as an SCC's seccompProfiles names it.
func seccompName(p *corev1.SeccompProfile) string {
	switch {
	case p == nil:
		return ""
	case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		return "runtime/default"
	case p.Type == corev1.SeccompProfileTypeUnconfined:
		return "unconfined"
	case p.Type == corev1.SeccompProfileTypeLocalhost:
		return "localhost/" + ptr.Deref(p.LocalhostProfile, "")
	}
	return string(p.Type)
}

// volumeKind is a volume's kind as an SCC's volumes names it.
func volumeKind(v corev1.Volume) securityv1.FSType {
	s := v.VolumeSource
	switch {
	case s.EmptyDir != nil:
		return securityv1.FSTypeEmptyDir
	case s.Secret != nil:
		return securityv1.FSTypeSecret
	case s.ConfigMap != nil:
		return securityv1.FSTypeConfigMap
	case s.Projected != nil:
		return securityv1.FSProjected
	case s.CSI != nil:
		return securityv1.FSTypeCSI
	case s.DownwardAPI != nil:
		return securityv1.FSTypeDownwardAPI
	case s.HostPath != nil:
		return securityv1.FSTypeHostPath
	case s.PersistentVolumeClaim != nil:
		return securityv1.FSTypePersistentVolumeClaim
	case s.Ephemeral != nil:
		return securityv1.FSTypeEphemeral
	case s.Image != nil:
		return "image"
	}
	return securityv1.FSTypeNone
}

// storedPod is pod as the apiserver would store it (a server-side dry
// run: defaults, and the service account admission's token volume), the
// spec SCC admission judges.
func storedPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	_, _ = b.Clientset.CoreV1().ServiceAccounts(pod.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	got, err := b.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	// The bed's apiserver mounts no service account token; a cluster's
	// ServiceAccount admission, which runs before SCC admission, adds it as
	// a projected volume unless the pod opts out.
	if ptr.Deref(got.Spec.AutomountServiceAccountToken, true) && !slices.ContainsFunc(got.Spec.Volumes, func(v corev1.Volume) bool {
		return strings.HasPrefix(v.Name, "kube-api-access-")
	}) {
		got.Spec.Volumes = append(got.Spec.Volumes, corev1.Volume{Name: "kube-api-access-bed", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}},
		}})
	}
	return got
}

// buildPods are the pods build-controller makes, with every input that
// adds a volume: a multi-platform Docker build with pull, push, source
// and input secrets, input ConfigMaps, strategy volumes (secret,
// ConfigMap, CSI), the trusted CA and the service account's pull secrets;
// its manifest-list and tag-removing pods; a classic build; a Source
// build.
func buildPods(t *testing.T, ns string, mode configv1alpha1.PodSecurity) []*corev1.Pod {
	t.Helper()
	cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{
		BuilderImage: "registry.example.com/archway/builder:v1", PodSecurity: mode,
		TrustedCA:        &configv1alpha1.TrustedCAConfig{ConfigMapName: "trusted-ca"},
		WorkDirSizeLimit: ptr.To(resource.MustParse("1Gi")),
	}}
	configv1alpha1.SetDefaults(cfg)
	docker := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-1", UID: "app-1-uid"}}
	docker.Spec.MountTrustedCA = ptr.To(true)
	docker.Spec.Source.SourceSecret = &corev1.LocalObjectReference{Name: "git"}
	docker.Spec.Source.Secrets = []buildv1.SecretBuildSource{{Secret: corev1.LocalObjectReference{Name: "input"}}}
	docker.Spec.Source.ConfigMaps = []buildv1.ConfigMapBuildSource{{ConfigMap: corev1.LocalObjectReference{Name: "input"}}}
	docker.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{
		PullSecret: &corev1.LocalObjectReference{Name: "pull"},
		Volumes: []buildv1.BuildVolume{
			{Name: "s", Source: buildv1.BuildVolumeSource{Type: buildv1.BuildVolumeSourceTypeSecret, Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "c", Source: buildv1.BuildVolumeSource{Type: buildv1.BuildVolumeSourceTypeConfigMap, ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
			{Name: "csi", Source: buildv1.BuildVolumeSource{Type: buildv1.BuildVolumeSourceTypeCSI, CSI: &corev1.CSIVolumeSource{Driver: "inline.example.com"}}},
		},
	}}
	docker.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}
	docker.Spec.Output.PushSecret = &corev1.LocalObjectReference{Name: "push"}
	multi := controller.PodPlan{Config: &cfg.Build, Platforms: []string{"linux/amd64", "linux/arm64"}, AccountPullSecrets: []string{"account"}}
	var pods []*corev1.Pod
	add := func(p *corev1.Pod, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	add(multi.BuildPod(docker, "linux/arm64"))
	add(multi.ManifestListPod(docker))
	add(multi.RemoveTagsPod(docker))
	classic := controller.PodPlan{Config: &cfg.Build}
	add(classic.BuildPod(docker, ""))
	source := docker.DeepCopy()
	source.Name, source.UID = "s2i-1", "s2i-1-uid"
	source.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/s2i/builder:1"},
	}}
	add(multi.BuildPod(source, "linux/amd64"))
	return pods
}

// TestOpenShiftSCCs renders the OpenShift overlays with kustomize and
// judges, by the rules of their SecurityContextConstraints (openshift/api's
// fields): every pod build-controller makes is admitted by archway-build,
// and every allowance of archway-build is needed by one of them; the
// privileged opt-in (build.podSecurity Privileged) is not admitted; only
// build-controller may use it. The emulation DaemonSet's pod is admitted
// by archway-emulation, which archway-build does not stand in for, and
// only the DaemonSet's service account, in its namespace, may use it.
// SCC admission itself is OpenShift's and does not run on the bed: these
// are its rules as this test reads them, applied to the pods as the real
// apiserver stores them.
func TestOpenShiftSCCs(t *testing.T) {
	overlay := render(t, "openshift")
	scc := overlay.sccs["archway-build"]
	if scc == nil {
		t.Fatal("manifests/openshift has no SecurityContextConstraints archway-build")
	}
	ns := newNamespace(t)
	pods := buildPods(t, ns, configv1alpha1.PodSecurityUnprivileged)
	usedCaps := sets.New[corev1.Capability]()
	usedVolumes := sets.New[securityv1.FSType]()
	escalates := false
	for _, pod := range pods {
		stored := storedPod(t, pod)
		if v := sccViolations(scc, stored); len(v) > 0 {
			t.Errorf("pod %s is not admitted by archway-build: %s", pod.Name, strings.Join(v, "; "))
		}
		for _, vol := range stored.Spec.Volumes {
			usedVolumes.Insert(volumeKind(vol))
		}
		for _, c := range stored.Spec.Containers {
			if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
				usedCaps.Insert(sc.Capabilities.Add...)
			}
			if c.SecurityContext == nil || ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true) {
				escalates = true
			}
		}
	}
	// Each allowance is needed.
	if extra := sets.New(scc.AllowedCapabilities...).Difference(usedCaps); extra.Len() > 0 {
		t.Errorf("archway-build allows capabilities no build pod adds: %v", sets.List(extra))
	}
	if extra := sets.New(scc.Volumes...).Difference(usedVolumes); extra.Len() > 0 {
		t.Errorf("archway-build allows volume kinds no build pod mounts: %v", sets.List(extra))
	}
	if ptr.Deref(scc.AllowPrivilegeEscalation, true) && !escalates {
		t.Error("archway-build allows privilege escalation, which no build container needs")
	}
	if len(scc.DefaultAddCapabilities) > 0 || scc.AllowPrivilegedContainer || scc.AllowHostDirVolumePlugin || scc.AllowHostNetwork ||
		scc.AllowHostPID || scc.AllowHostIPC || scc.AllowHostPorts || len(scc.AllowedUnsafeSysctls) > 0 || len(scc.Users) > 0 || len(scc.Groups) > 0 {
		t.Errorf("archway-build allows what no build pod needs: %+v", scc)
	}
	if scc.UserNamespaceLevel != securityv1.NamespaceLevelRequirePod {
		t.Errorf("archway-build admits pods in the host's user namespace (userNamespaceLevel %q): its root and SYS_ADMIN would be the node's", scc.UserNamespaceLevel)
	}
	// The privileged opt-in is the administrator's to grant.
	for _, pod := range buildPods(t, ns, configv1alpha1.PodSecurityPrivileged) {
		if pod.Annotations[controller.PodSecurityAnnotation] != string(configv1alpha1.PodSecurityPrivileged) || pod.Labels[buildv1.PodRoleLabel] != buildv1.PodRoleBuild {
			continue
		}
		if v := sccViolations(scc, storedPod(t, pod)); len(v) == 0 {
			t.Errorf("the privileged build pod %s is admitted by archway-build", pod.Name)
		}
	}
	users := overlay.sccUsers("archway-build")
	if len(users) != 1 || users["ServiceAccount archway-system/build-controller"] != "" {
		t.Errorf("archway-build may be used by %v, want build-controller's service account alone, in every namespace", users)
	}

	// The custom-builder mode ships the same SCC and the role to use it,
	// bound to no one: an administrator binds it per build namespace to
	// the builder account that creates the build pods there.
	custom := render(t, "openshift-builds")
	if cscc := custom.sccs["archway-build"]; cscc == nil || !equality.Semantic.DeepEqual(cscc, scc) {
		t.Errorf("manifests/openshift-builds' archway-build is not manifests/openshift's: %+v", cscc)
	}
	if custom.clusterRoles["archway-build-scc"] == nil {
		t.Error("manifests/openshift-builds has no ClusterRole archway-build-scc to bind per namespace")
	}
	if users := custom.sccUsers("archway-build"); len(users) != 0 {
		t.Errorf("manifests/openshift-builds lets %v use archway-build; want no one until an administrator binds a namespace's builder", users)
	}

	emulation := render(t, "openshift/emulation")
	escc := emulation.sccs["archway-emulation"]
	if escc == nil || len(emulation.daemonSets) != 1 {
		t.Fatalf("manifests/openshift/emulation: SCC %v, %d DaemonSets; want archway-emulation and one DaemonSet", escc, len(emulation.daemonSets))
	}
	ds := emulation.daemonSets[0]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(t), Name: "emulation-setup-x"}, Spec: ds.Spec.Template.Spec}
	stored := storedPod(t, pod)
	if v := sccViolations(escc, stored); len(v) > 0 {
		t.Errorf("the emulation DaemonSet's pod is not admitted by archway-emulation: %s", strings.Join(v, "; "))
	}
	if v := sccViolations(scc, stored); len(v) == 0 {
		t.Error("the emulation DaemonSet's pod is admitted by archway-build")
	}
	var kinds []securityv1.FSType
	for _, vol := range stored.Spec.Volumes {
		kinds = append(kinds, volumeKind(vol))
	}
	if extra := sets.New(escc.Volumes...).Difference(sets.New(kinds...)); extra.Len() > 0 {
		t.Errorf("archway-emulation allows volume kinds the pod does not mount: %v", sets.List(extra))
	}
	if !ptr.Deref(stored.Spec.Containers[0].SecurityContext.Privileged, false) {
		t.Error("the emulation pod is not privileged: archway-emulation need not allow it")
	}
	if escc.AllowHostDirVolumePlugin || escc.AllowHostNetwork || escc.AllowHostPID || escc.AllowHostIPC || escc.AllowHostPorts ||
		len(escc.AllowedCapabilities) > 0 || len(escc.Users) > 0 || len(escc.Groups) > 0 {
		t.Errorf("archway-emulation allows what the DaemonSet does not need: %+v", escc)
	}
	eusers := emulation.sccUsers("archway-emulation")
	if len(eusers) != 1 || eusers["ServiceAccount archway-emulation/emulation-setup"] != "archway-emulation" {
		t.Errorf("archway-emulation may be used by %v, want the DaemonSet's service account alone, in archway-emulation", eusers)
	}
}
