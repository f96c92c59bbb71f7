package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

func TestShouldGate(t *testing.T) {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	deleting := cfg.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	selective := cfg.DeepCopy()
	selective.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"placement": "on"}}
	plain := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	withNodeName := plain()
	withNodeName.Spec.NodeName = "node-amd64-1"
	daemon := plain()
	daemon.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
	listsDaemonSet := plain()
	listsDaemonSet.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}
	controlPlane := plain()
	controlPlane.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	master := plain()
	master.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/master": ""}
	archTerm := func(values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: placement.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: values}}}
	}
	withTerms := func(terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		p := plain()
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
		return p
	}
	requiredArch := withTerms(archTerm("arm64"), archTerm("amd64"))
	oneTermOpen := withTerms(archTerm("arm64"), corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}})
	requiredArchOwnPreference := withTerms(archTerm("arm64", "amd64"))
	requiredArchOwnPreference.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 20, Preference: archTerm("amd64")}}
	scoring := cfg.DeepCopy()
	scoring.Spec.Plugins = &multiarchv1beta1.Plugins{NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{
		Enabled: true, Platforms: []multiarchv1beta1.NodeAffinityScoringPlatformTerm{{Architecture: "ppc64le", Weight: 30}},
	}}
	nsScoring := []multiarchv1beta1.PodPlacementConfig{{ObjectMeta: metav1.ObjectMeta{Name: "tuning"}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Plugins: scoring.Spec.Plugins}}}
	job := plain()
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j"}}
	pinned := plain()
	pinned.Spec.NodeSelector = map[string]string{placement.ArchLabel: "arm64"}
	otherSelector := plain()
	otherSelector.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	gated := plain()
	placement.Gate(gated)

	tests := []struct {
		name       string
		in         admissionInput
		want       bool
		wantReason string
	}{
		{name: "no config", in: admissionInput{pod: plain(), namespace: "app"}, wantReason: skipNoConfig},
		{name: "config being deleted", in: admissionInput{pod: plain(), namespace: "app", config: deleting}, wantReason: skipConfigDeleting},
		{name: "no controller alive: nobody would remove the gate", in: admissionInput{pod: plain(), namespace: "app", config: cfg}, wantReason: skipNoController},
		{name: "plain pod", in: admissionInput{pod: plain(), namespace: "app", config: cfg, controllerAlive: true}, want: true},
		{name: "kube-system", in: admissionInput{pod: plain(), namespace: "kube-system", config: cfg, controllerAlive: true}, wantReason: skipReservedNamespace},
		{name: "openshift-*", in: admissionInput{pod: plain(), namespace: "openshift-monitoring", config: cfg, controllerAlive: true}, wantReason: skipReservedNamespace},
		{name: "hypershift-*", in: admissionInput{pod: plain(), namespace: "hypershift-x", config: cfg, controllerAlive: true}, wantReason: skipReservedNamespace},
		{name: "archway's own", in: admissionInput{pod: plain(), namespace: "archway-system", ownNamespace: "archway-system", config: cfg, controllerAlive: true}, wantReason: skipReservedNamespace},
		{name: "kubernetes (no dash) is not reserved", in: admissionInput{pod: plain(), namespace: "kubernetes", config: cfg, controllerAlive: true}, want: true},
		{name: "nodeName set", in: admissionInput{pod: withNodeName, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipNodeName},
		{name: "DaemonSet pod", in: admissionInput{pod: daemon, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipDaemonSet},
		{name: "a pod that merely lists a DaemonSet", in: admissionInput{pod: listsDaemonSet, namespace: "app", config: cfg, controllerAlive: true}, want: true},
		{name: "control-plane nodeSelector", in: admissionInput{pod: controlPlane, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipControlPlane},
		{name: "master nodeSelector", in: admissionInput{pod: master, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipControlPlane},
		{name: "every required term pins arch, no preferences", in: admissionInput{pod: requiredArch, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipRequiredArch},
		{name: "every required term pins arch, the cluster config would add a preference", in: admissionInput{pod: requiredArch, namespace: "app", config: scoring, controllerAlive: true}, want: true},
		{name: "every required term pins arch, a namespace config would add a preference", in: admissionInput{pod: requiredArch, namespace: "app", config: cfg, local: nsScoring, controllerAlive: true}, want: true},
		{name: "every required term pins arch, the pod states its own arch preference", in: admissionInput{pod: requiredArchOwnPreference, namespace: "app", config: scoring, controllerAlive: true}, wantReason: skipRequiredArch},
		{name: "one required term leaves arch open", in: admissionInput{pod: oneTermOpen, namespace: "app", config: cfg, controllerAlive: true}, want: true},
		{name: "Job pod", in: admissionInput{pod: job, namespace: "app", config: cfg, controllerAlive: true}, want: true},
		{name: "nodeSelector pins arch", in: admissionInput{pod: pinned, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipPinnedArch},
		{name: "nodeSelector pins arch, the cluster config would add a preference (gated and scored, as the multiarch tuning operator)", in: admissionInput{pod: pinned, namespace: "app", config: scoring, controllerAlive: true}, want: true},
		{name: "other nodeSelector", in: admissionInput{pod: otherSelector, namespace: "app", config: cfg, controllerAlive: true}, want: true},
		{name: "already gated", in: admissionInput{pod: gated, namespace: "app", config: cfg, controllerAlive: true}, wantReason: skipAlreadyGated},
		{name: "namespace selected", in: admissionInput{pod: plain(), namespace: "app", namespaceLabels: labels.Set{"placement": "on"}, config: selective, controllerAlive: true}, want: true},
		{name: "namespace not selected", in: admissionInput{pod: plain(), namespace: "app", namespaceLabels: labels.Set{}, config: selective, controllerAlive: true}, wantReason: skipNamespaceSelector},
		{name: "namespace unknown: the apiserver filtered", in: admissionInput{pod: plain(), namespace: "app", config: selective, controllerAlive: true}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := shouldGate(tt.in)
			if got != tt.want || reason != tt.wantReason {
				t.Errorf("shouldGate = %v, %q; want %v, %q", got, reason, tt.want, tt.wantReason)
			}
		})
	}
}

func TestAdmissionLabels(t *testing.T) {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	deleting := cfg.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	selective := cfg.DeepCopy()
	selective.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"placement": "on"}}
	scoring := &multiarchv1beta1.Plugins{NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{
		Enabled: true, Platforms: []multiarchv1beta1.NodeAffinityScoringPlatformTerm{{Architecture: "ppc64le", Weight: 30}},
	}}
	withScoring := cfg.DeepCopy()
	withScoring.Spec.Plugins = scoring
	pod := func(l map[string]string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	tests := []struct {
		name  string
		in    admissionInput
		gated bool
		want  map[string]string
	}{
		{name: "gated", in: admissionInput{pod: pod(nil), namespace: "team", config: cfg}, gated: true,
			want: map[string]string{placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set"}},
		{name: "admitted ungated while placement is on", in: admissionInput{pod: pod(nil), namespace: "team", config: cfg},
			want: map[string]string{placement.SchedulingGateLabel: "not-set", placement.NodeAffinityLabel: "not-set"}},
		{name: "scoring in the cluster config", in: admissionInput{pod: pod(nil), namespace: "team", config: withScoring}, gated: true,
			want: map[string]string{placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "not-set"}},
		{name: "scoring in a namespace config selecting the pod", gated: true, in: admissionInput{pod: pod(map[string]string{"app": "web"}), namespace: "team", config: cfg,
			local: []multiarchv1beta1.PodPlacementConfig{{Spec: multiarchv1beta1.PodPlacementConfigSpec{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Plugins: scoring}}}},
			want: map[string]string{placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "not-set"}},
		{name: "scoring in a namespace config not selecting the pod", gated: true, in: admissionInput{pod: pod(nil), namespace: "team", config: cfg,
			local: []multiarchv1beta1.PodPlacementConfig{{Spec: multiarchv1beta1.PodPlacementConfigSpec{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Plugins: scoring}}}},
			want: map[string]string{placement.SchedulingGateLabel: "gated", placement.NodeAffinityLabel: "not-set"}},
		{name: "placement off", in: admissionInput{pod: pod(nil), namespace: "team"}},
		{name: "config being deleted", in: admissionInput{pod: pod(nil), namespace: "team", config: deleting}},
		{name: "reserved namespace", in: admissionInput{pod: pod(nil), namespace: "kube-system", config: cfg}},
		{name: "namespace not selected", in: admissionInput{pod: pod(nil), namespace: "team", config: selective, namespaceLabels: labels.Set{"placement": "off"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := admissionLabels(tt.in, tt.gated)
			if len(got) != len(tt.want) {
				t.Fatalf("labels %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("labels %v, want %v", got, tt.want)
				}
			}
		})
	}
}
