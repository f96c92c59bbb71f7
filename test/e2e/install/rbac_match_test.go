package install

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// TestRefusedBy checks which refused requests in the audit log count as
// refused for want of a rule: the proof's positive signal.
func TestRefusedBy(t *testing.T) {
	secretsRole := roleRule{kind: "Role", namespace: namespace, name: "r", accounts: []string{"archway-placement-webhook"},
		rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"tls"}, Verbs: []string{"get", "update"}}}
	useRule := roleRule{kind: "ClusterRole", name: "c", accounts: []string{"build-controller"},
		rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"use"}}}
	statusRule := roleRule{kind: "ClusterRole", name: "archway-builder", accounts: []string{builderAccounts},
		rule: rbacv1.PolicyRule{APIGroups: []string{"build.openshift.io"}, Resources: []string{"builds/status"}, Verbs: []string{"patch"}}}
	event := func(user, verb, group, resource, sub, ns, name string, code int32, decision, message string) *auditv1.Event {
		return &auditv1.Event{
			Stage:          auditv1.StageResponseComplete,
			User:           authenticationv1.UserInfo{Username: user},
			Verb:           verb,
			ObjectRef:      &auditv1.ObjectReference{APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name},
			ResponseStatus: &metav1.Status{Code: code, Message: message},
			Annotations:    map[string]string{"authorization.k8s.io/decision": decision},
		}
	}
	const webhook = "system:serviceaccount:archway-system:archway-placement-webhook"
	const controller = "system:serviceaccount:archway-system:build-controller"
	for _, c := range []struct {
		name string
		r    roleRule
		ev   *auditv1.Event
		want bool
	}{
		{"covered", secretsRole, event(webhook, "get", "", "secrets", "", namespace, "tls", 403, "forbid", ""), true},
		{"allowed", secretsRole, event(webhook, "get", "", "secrets", "", namespace, "tls", 200, "allow", ""), false},
		{"another name", secretsRole, event(webhook, "get", "", "secrets", "", namespace, "other", 403, "forbid", ""), false},
		{"another namespace", secretsRole, event(webhook, "get", "", "secrets", "", "default", "tls", 403, "forbid", ""), false},
		{"another verb", secretsRole, event(webhook, "list", "", "secrets", "", namespace, "tls", 403, "forbid", ""), false},
		{"another account", secretsRole, event(controller, "get", "", "secrets", "", namespace, "tls", 403, "forbid", ""), false},
		{"a user", secretsRole, event("alice", "get", "", "secrets", "", namespace, "tls", 403, "forbid", ""), false},
		{"policy: use", useRule, event(controller, "create", "build.openshift.io", "builds", "", "ns", "", 403, "allow",
			"spec.serviceAccount: system:serviceaccount:archway-system:build-controller may not use service account app in namespace ns (build pods run with its token)"), true},
		{"policy: use of another account", roleRule{kind: "ClusterRole", name: "c", accounts: []string{"build-controller"},
			rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"x"}, Verbs: []string{"use"}}},
			event(controller, "create", "build.openshift.io", "builds", "", "ns", "", 403, "allow", "may not use service account app in namespace ns"), false},
		{"policy: strategy is not use", useRule, event(controller, "create", "build.openshift.io", "builds", "", "ns", "", 403, "allow", "build strategy Docker is not allowed"), false},
		{"policy: get ConfigMap", roleRule{kind: "ClusterRole", name: "c", accounts: []string{"build-controller"},
			rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
			event(controller, "create", "build.openshift.io", "builds", "", "ns", "", 403, "allow",
				"system:serviceaccount:archway-system:build-controller may not get ConfigMap settings in namespace ns, which spec names: ..."), true},
		{"policy: get Secret is not get ConfigMap", roleRule{kind: "ClusterRole", name: "c", accounts: []string{"build-controller"},
			rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
			event(controller, "create", "build.openshift.io", "builds", "", "ns", "", 403, "allow",
				"system:serviceaccount:archway-system:build-controller may not get Secret settings in namespace ns, which spec names: ..."), false},
		{"builder pod", statusRule, event("system:serviceaccount:ns:builder", "patch", "build.openshift.io", "builds", "status", "ns", "b", 403, "forbid", ""), true},
		{"another service account of a build namespace", statusRule, event("system:serviceaccount:ns:app", "patch", "build.openshift.io", "builds", "status", "ns", "b", 403, "forbid", ""), false},
	} {
		if _, got := refusedBy(c.r, c.ev); got != c.want {
			t.Errorf("%s: refusedBy = %v, want %v", c.name, got, c.want)
		}
	}
}
