package protection

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
)

// TestNetworkAddOnDaemonSets runs, in mode Enable with the shipped list
// alone, a network add-on's DaemonSet in each add-on namespace the list
// names (as flannel's and Calico's manifests have them: their own
// namespace and service account, host network, every taint tolerated)
// under the real DaemonSet controller, and sees each get its pod on
// control-plane-1. Without the namespace's entry the controller's create is
// denied (the node would have no pod network).
func TestNetworkAddOnDaemonSets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	kcm, err := startComponent(ctx, "kube-controller-manager", "system:kube-controller-manager", nil, controllerManagerArgs)
	if err != nil {
		t.Fatal(err)
	}
	defer kcm.stop()
	useConfig(t, schedulingv1alpha1.ModeEnable)
	for _, entry := range []string{"kube-flannel/flannel", "calico-system/calico-node", "tigera-operator/tigera-operator"} {
		ns, sa, _ := strings.Cut(entry, "/")
		t.Run(ns, func(t *testing.T) {
			if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			labels := map[string]string{"app": sa}
			spec := makePod(ns, "").obj().Spec
			spec.ServiceAccountName, spec.HostNetwork = sa, true
			spec.PriorityClassName = "system-node-critical"
			spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, {Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
			ds := &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
			}
			if err := k8s.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = k8s.Delete(context.Background(), ds, client.PropagationPolicy(metav1.DeletePropagationBackground))
				_ = k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
			})
			waitControllerPod(ctx, t, ns, sa, labels)
		})
	}
}

// waitControllerPod waits until a pod with labels in ns is on
// control-plane-1; a controller's event saying the webhook denied a pod of
// the object named owner fails at once.
func waitControllerPod(ctx context.Context, t *testing.T, ns, owner string, labels map[string]string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if denial := webhookDenial(ctx, ns, owner); denial != "" {
			return false, fmt.Errorf("%s", denial)
		}
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == controlPlaneNode }), nil
	})
	if err != nil {
		t.Fatalf("%s/%s has no pod on %s: %v", ns, owner, controlPlaneNode, err)
	}
}

// TestKubectlDebugNode runs the real `kubectl debug node/control-plane-1`
// in mode Enable with the shipped list: a cluster administrator in
// system:masters, and one bound to cluster-admin through kubeadm's
// kubeadm:cluster-admins ClusterRoleBinding, get their debugging pod on the
// node in a namespace nobody authorized; a user who may create pods there
// but is in no authorized group is denied, with the message saying what
// to authorize. Any RBAC binding authorizes too: an administrator bound
// to cluster-admin by user name, and a user granted the verb use on
// controlplaneprotections/controlplane by a RoleBinding, for pods of that
// namespace only.
func TestKubectlDebugNode(t *testing.T) {
	h := newHarness(t, "debug")
	useConfig(t, schedulingv1alpha1.ModeEnable)
	// kubeadm's binding (kubeadm init creates it for admin.conf's group).
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:cluster-admins"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "kubeadm:cluster-admins"}},
	}
	if err := k8s.Create(h.ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A user who may create pods in the namespace and read nodes, as
	// kubectl debug node needs, and nothing more.
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-node-debugger"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}},
		},
	}
	if err := k8s.Create(h.ctx, reader); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := k8s.Create(h.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-mallory-node-debugger"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}},
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := k8s.Create(h.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "mallory-debugger"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}},
	}); err != nil {
		t.Fatal(err)
	}
	// An administrator bound by user name, in no listed group.
	if err := k8s.Create(h.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-ops-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "ops-admin"}},
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A node debugger granted the control plane's use in h.ns alone.
	other := newHarness(t, "debug-other")
	user := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "control-plane-user"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{schedulingv1alpha1.GroupVersion.Group},
			Resources: []string{protection.ProtectionsResource + "/" + protection.GroupSubresource(schedulingv1alpha1.ControlPlane)},
			Verbs:     []string{protection.UseVerb},
		}},
	}
	if err := k8s.Create(h.ctx, user); err != nil {
		t.Fatal(err)
	}
	trent := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "trent"}}
	if err := k8s.Create(h.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-trent-node-debugger"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   trent,
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := k8s.Create(h.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "trent-control-plane"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user.Name},
		Subjects:   trent,
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, group string
	}{
		{"system:masters", "root-admin", "system:masters"},
		{"cluster-admin binding", "kubernetes-admin", "kubeadm:cluster-admins"},
		{"cluster-admin bound by user name", "ops-admin", ""},
		{"use granted in the namespace", "trent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := kubectlDebugNode(h.ctx, h.ns, tc.user, tc.group)
			if err != nil {
				t.Fatalf("kubectl debug node/%s as %s (group %s): %v\n%s", controlPlaneNode, tc.user, tc.group, err, out)
			}
			name := debugPodName(out)
			pod := &corev1.Pod{}
			if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, pod); err != nil {
				t.Fatalf("the debugging pod %q of kubectl's output %q: %v", name, out, err)
			}
			if pod.Spec.NodeName != controlPlaneNode {
				t.Fatalf("debugging pod %s is for node %q, want %s", name, pod.Spec.NodeName, controlPlaneNode)
			}
		})
	}
	t.Run("a user in no authorized group is denied", func(t *testing.T) {
		out, err := kubectlDebugNode(h.ctx, h.ns, "mallory", "")
		if err == nil {
			t.Fatalf("kubectl debug node/%s as mallory succeeded, want a denial:\n%s", controlPlaneNode, out)
		}
		for _, want := range []string{"denied the request", `spec.nodeName "` + controlPlaneNode + `"`, `the requesting user "mallory"`,
			"the verb use on controlplaneprotections/controlplane"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl's output %q lacks %q", out, want)
			}
		}
	})
	t.Run("use granted in another namespace is denied", func(t *testing.T) {
		out, err := kubectlDebugNode(h.ctx, other.ns, "trent", "")
		if err == nil {
			t.Fatalf("kubectl debug node/%s as trent in %s succeeded, want a denial (use is granted in %s only):\n%s", controlPlaneNode, other.ns, h.ns, out)
		}
		if !strings.Contains(out, "denied the request") {
			t.Errorf("kubectl's output %q is no denial", out)
		}
	})
}

// kubectlDebugNode runs `kubectl debug node/control-plane-1` in ns as user
// (and group, if any) by impersonation from the bed's admin, and returns
// its output.
func kubectlDebugNode(ctx context.Context, ns, user, group string) (string, error) {
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		return "", err
	}
	args := []string{"--kubeconfig=" + testBed.Kubeconfig, "--as=" + user, "--as-group=system:authenticated"}
	if group != "" {
		args = append(args, "--as-group="+group)
	}
	args = append(args, "-n", ns, "debug", "node/"+controlPlaneNode, "--image=busybox", "--profile=general", "--", "true")
	out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
	return string(out), err
}

// debugPodName reads the pod's name from kubectl debug's "Creating
// debugging pod NAME with container ..." line.
func debugPodName(out string) string {
	_, rest, ok := strings.Cut(out, "Creating debugging pod ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return name
}
