package custom

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestConfigMapName(t *testing.T) {
	rule := func(group, resource string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"get"}, ResourceNames: names}
	}
	self := rule("rbac.authorization.k8s.io", "roles", ConfigRole)
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  string // "" fails
	}{
		{"the generated name", []rbacv1.PolicyRule{rule("", "configmaps", "build-controller-config-abc"), self}, "build-controller-config-abc"},
		{"no ConfigMap", []rbacv1.PolicyRule{self}, ""},
		{"every ConfigMap", []rbacv1.PolicyRule{rule("", "configmaps"), self}, ""},
		{"two ConfigMaps", []rbacv1.PolicyRule{rule("", "configmaps", "a", "b")}, ""},
		{"two rules", []rbacv1.PolicyRule{rule("", "configmaps", "a"), rule("", "configmaps", "b")}, ""},
		{"another group's configmaps", []rbacv1.PolicyRule{rule("example.com", "configmaps", "a")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigMapName(&rbacv1.Role{Rules: tc.rules})
			switch {
			case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "must grant get on exactly one ConfigMap")):
				t.Errorf("ConfigMapName = %q, %v; want refused", got, err)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("ConfigMapName = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
