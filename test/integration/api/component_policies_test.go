package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureNamespace creates namespace name unless it exists.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := b.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// asServiceAccount is a client acting as a service account, by
// impersonation with the groups its tokens carry.
func asServiceAccount(t *testing.T, ns, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(b.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{Scheme: b.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindClusterRole binds a service account to a ClusterRole cluster-wide.
func bindClusterRole(t *testing.T, role, ns, account string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: account}}}
	if err := b.Client.Create(context.Background(), crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Client.Delete(context.Background(), crb) })
}

// TestPlacementLeasePolicy installs the placement components' roles and
// the archway-placement-leases policy: the webhook's service account may
// create and update the priority claims of PodPlacementConfigs in any
// namespace, and the controller's may delete them, but neither may write
// a node's heartbeat in kube-node-lease nor another component's leader
// election Lease in kube-system, which RBAC alone (leases cluster-wide)
// lets them. With the policy's binding gone, the refused update goes
// through (so the test can fail).
func TestPlacementLeasePolicy(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "archway-system")
	objs := installManifests(t, "manifests/placement/rbac/lease_policy.yaml", "manifests/placement/rbac/webhook_role.yaml", "manifests/placement/rbac/controller_role.yaml")
	bindClusterRole(t, "archway-placement-webhook", "archway-system", "archway-placement-webhook")
	bindClusterRole(t, "archway-placement-controller", "archway-system", "archway-placement-controller")
	webhook := asServiceAccount(t, "archway-system", "archway-placement-webhook")
	controller := asServiceAccount(t, "archway-system", "archway-placement-controller")
	ns := newNamespace(t)

	heartbeat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "lease-policy-node"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("lease-policy-node")}}
	if err := b.Client.Create(ctx, heartbeat); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Client.Delete(context.Background(), heartbeat) })
	stolen := func() *coordinationv1.Lease {
		l := heartbeat.DeepCopy()
		l.Spec.HolderIdentity = ptr.To("archway")
		return l
	}
	refused := func(what string, err error, lease string) {
		t.Helper()
		want := "may write only the priority claims of PodPlacementConfigs (Leases named archway-ppc-priority-<n>) outside archway-system, not Lease " + lease
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want Forbidden saying %q", what, err, want)
		}
	}
	// In force once the webhook's update of the heartbeat is refused by
	// the policy (RBAC, not yet seen, would refuse it without naming it).
	eventually(t, "the policy refuses the webhook's update of a node's heartbeat", func() bool {
		err := webhook.Update(ctx, stolen(), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "not Lease kube-node-lease/lease-policy-node")
	})

	claim := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "archway-ppc-priority-5"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("config")}}
	if err := webhook.Create(ctx, claim); err != nil {
		t.Fatalf("the webhook's priority claim: %v", err)
	}
	claim.Spec.HolderIdentity = ptr.To("other")
	if err := webhook.Update(ctx, claim); err != nil {
		t.Errorf("the webhook's update of its claim: %v", err)
	}
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kube-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("archway")}}
	refused("the webhook creating kube-system's scheduler Lease", webhook.Create(ctx, leader, client.DryRunAll), "kube-system/kube-scheduler")
	refused("the webhook updating a node's heartbeat", webhook.Update(ctx, stolen(), client.DryRunAll), "kube-node-lease/lease-policy-node")
	refused("the controller deleting a node's heartbeat", controller.Delete(ctx, heartbeat.DeepCopy(), client.DryRunAll), "kube-node-lease/lease-policy-node")
	if err := controller.Delete(ctx, claim); err != nil {
		t.Errorf("the controller's delete of a claim: %v", err)
	}

	if err := b.Client.Delete(ctx, objs["ValidatingAdmissionPolicyBinding/archway-placement-leases"]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "with the policy unbound, the webhook may update a node's heartbeat", func() bool {
		return webhook.Update(ctx, stolen(), client.DryRunAll) == nil
	})
}

// TestPlacementOperandBindingPolicy installs the placement operator's
// role and the archway-placement-operand-bindings policy: the operator's
// service account may bind the placement controller's ClusterRole to the
// controller's service account, but not to its own (nor to anyone else),
// nor under another name, which RBAC alone (bind on the ClusterRole, create
// on every ClusterRoleBinding) lets it; and it may bind no other
// ClusterRole. With the policy's binding gone, binding the controller's
// ClusterRole to the operator goes through (so the test can fail).
func TestPlacementOperandBindingPolicy(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "archway-system")
	objs := installManifests(t, "manifests/placement/rbac/operand_binding_policy.yaml", "manifests/placement/rbac/operator_role.yaml",
		"manifests/placement/rbac/controller_role.yaml", "manifests/placement/rbac/webhook_role.yaml")
	bindClusterRole(t, "archway-placement-operator", "archway-system", "archway-placement-operator")
	operator := asServiceAccount(t, "archway-system", "archway-placement-operator")
	crb := func(name, role, account string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "archway-system", Name: account}}}
	}
	const controller = "archway-placement-controller"
	toItself := func() *rbacv1.ClusterRoleBinding { return crb(controller, controller, "archway-placement-operator") }
	refused := func(what string, err error, name string) {
		t.Helper()
		want := "the placement operator may bind only archway-placement-controller and archway-placement-webhook, each ClusterRole to the service account of its name in archway-system, not ClusterRoleBinding " + name
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want Forbidden saying %q", what, err, want)
		}
	}
	// In force once the policy refuses the operator binding the
	// controller's ClusterRole to itself (RBAC, not yet seen, would
	// refuse it without naming it).
	eventually(t, "the policy refuses the operator binding the controller's role to itself", func() bool {
		err := operator.Create(ctx, toItself(), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "not ClusterRoleBinding "+controller)
	})
	if err := operator.Create(ctx, crb(controller, controller, controller), client.DryRunAll); err != nil {
		t.Errorf("the operator binding the controller's role to the controller: %v", err)
	}
	if err := operator.Create(ctx, crb("archway-placement-webhook", "archway-placement-webhook", "archway-placement-webhook"), client.DryRunAll); err != nil {
		t.Errorf("the operator binding the webhook's role to the webhook: %v", err)
	}
	refused("binding the controller's role to the operator", operator.Create(ctx, toItself(), client.DryRunAll), controller)
	refused("binding the controller's role under another name", operator.Create(ctx, crb("mine", controller, controller), client.DryRunAll), "mine")
	refused("binding the webhook's role as the controller's binding", operator.Create(ctx, crb(controller, "archway-placement-webhook", controller), client.DryRunAll), controller)
	twice := crb(controller, controller, controller)
	twice.Subjects = append(twice.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
	refused("binding the controller's role to every user as well", operator.Create(ctx, twice, client.DryRunAll), controller)
	if err := operator.Create(ctx, crb(controller, "cluster-admin", controller), client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("the operator binding cluster-admin: %v, want Forbidden (it may bind the placement roles only)", err)
	}

	if err := b.Client.Delete(ctx, objs["ValidatingAdmissionPolicyBinding/archway-placement-operand-bindings"]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "with the policy unbound, the operator may bind the controller's role to itself", func() bool {
		return operator.Create(ctx, toItself(), client.DryRunAll) == nil
	})
}

// TestEmulationNodePolicy installs emulation-setup's service account and
// role and the archway-emulation-setup-nodes policy, and acts with real
// tokens bound to a pod on node emu-a, as the DaemonSet's pod has: the
// pod may set and remove emulation.archway.dev/<arch> labels of emu-a, and
// nothing else, of emu-a or of emu-b, which RBAC alone (patch on every
// node) lets it. With the policy's binding gone, labelling emu-b goes
// through (so the test can fail).
func TestEmulationNodePolicy(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "archway-emulation")
	objs := installManifests(t, "manifests/emulation/node_policy.yaml", "manifests/emulation/rbac.yaml")
	for _, name := range []string{"emu-a", "emu-b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelArchStable: "amd64"}}}
		if err := b.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Client.Delete(context.Background(), n) })
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "archway-emulation", Name: "emulation-setup-emu-a"},
		Spec: corev1.PodSpec{NodeName: "emu-a", ServiceAccountName: "emulation-setup", Containers: []corev1.Container{{Name: "c", Image: "setup"}}}}
	if err := b.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	withToken := func(bound bool) client.Client {
		req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		if bound {
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
		}
		tok, err := b.Clientset.CoreV1().ServiceAccounts("archway-emulation").CreateToken(ctx, "emulation-setup", req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(b.Config)
		cfg.BearerToken = tok.Status.Token
		c, err := client.New(cfg, client.Options{Scheme: b.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	setup := withToken(true)
	patch := func(c client.Client, node, body string) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		return c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(body)), client.DryRunAll)
	}
	label := func(key, value string) string { return fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value) }
	refused := func(what string, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want Forbidden saying %q", what, err, want)
		}
	}
	eventually(t, "the policy refuses labelling another node", func() bool {
		err := patch(setup, "emu-b", label("emulation.archway.dev/arm64", "true"))
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "emulation-setup on node emu-a may not change node emu-b")
	})
	if err := patch(setup, "emu-a", label("emulation.archway.dev/arm64", "true")); err != nil {
		t.Errorf("labelling its own node: %v", err)
	}
	onlyLabels := "may change only the node's emulation.archway.dev/<arch> labels"
	refused("another label of its node", patch(setup, "emu-a", label("node-role.kubernetes.io/control-plane", "")), onlyLabels)
	refused("its node's architecture label", patch(setup, "emu-a", label(corev1.LabelArchStable, "arm64")), onlyLabels)
	refused("a taint on its node", patch(setup, "emu-a", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`), onlyLabels)
	refused("cordoning its node", patch(setup, "emu-a", `{"spec":{"unschedulable":true}}`), onlyLabels)
	refused("a token bound to no pod", patch(withToken(false), "emu-a", label("emulation.archway.dev/arm64", "true")), "its token names none")

	if err := b.Client.Delete(ctx, objs["ValidatingAdmissionPolicyBinding/archway-emulation-setup-nodes"]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "with the policy unbound, emulation-setup may label another node", func() bool {
		return patch(setup, "emu-b", label("emulation.archway.dev/arm64", "true")) == nil
	})
}
