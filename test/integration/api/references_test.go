package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBuildReferences installs the archway-build-references policy and
// archway:build-starter, and acts as alice, who holds only that role in a
// namespace: a Build naming a Secret or ConfigMap alice may not get, in any
// field of the spec that names one, is refused with a message naming it;
// once alice may get it, the same Build is allowed. A BuildConfig is
// checked on create and for the names an update adds. With the policy's
// binding gone, the refused Build goes through (so the test can fail).
func TestBuildReferences(t *testing.T) {
	ctx := context.Background()
	objs := installManifests(t, "manifests/authorization/build_references_policy.yaml", "manifests/authorization/build_starter_role.yaml")
	ns := newNamespace(t)
	grant(t, ns, "alice", "archway:build-starter")
	alice := as(t, "alice")
	const secret, configMap = "team-b-push", "team-b-settings"

	docker := func(s map[string]any) map[string]any {
		return s["strategy"].(map[string]any)["dockerStrategy"].(map[string]any)
	}
	sourceStrategy := func(s map[string]any) {
		s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "builder:1"}}}
	}
	valueFrom := func(ref, name string) []any {
		return []any{map[string]any{"name": "X", "valueFrom": map[string]any{ref: map[string]any{"name": name, "key": "k"}}}}
	}
	volume := func(source map[string]any) []any {
		return []any{map[string]any{"name": "v", "source": source, "mounts": []any{map[string]any{"destinationPath": "/v"}}}}
	}
	// Every field of a Build's spec that names a Secret or ConfigMap.
	secretFields := map[string]func(map[string]any){
		"env secretKeyRef":       func(s map[string]any) { docker(s)["env"] = valueFrom("secretKeyRef", secret) },
		"buildArgs secretKeyRef": func(s map[string]any) { docker(s)["buildArgs"] = valueFrom("secretKeyRef", secret) },
		"sourceSecret":           func(s map[string]any) { s["source"].(map[string]any)["sourceSecret"] = map[string]any{"name": secret} },
		"source.secrets": func(s map[string]any) {
			s["source"].(map[string]any)["secrets"] = []any{map[string]any{"secret": map[string]any{"name": secret}}}
		},
		"pushSecret": func(s map[string]any) { s["output"].(map[string]any)["pushSecret"] = map[string]any{"name": secret} },
		"pullSecret": func(s map[string]any) { docker(s)["pullSecret"] = map[string]any{"name": secret} },
		"secret volume": func(s map[string]any) {
			docker(s)["volumes"] = volume(map[string]any{"type": "Secret", "secret": map[string]any{"secretName": secret}})
		},
		"CSI volume's nodePublishSecretRef": func(s map[string]any) {
			docker(s)["volumes"] = volume(map[string]any{"type": "CSI", "csi": map[string]any{"driver": "d.example.com", "nodePublishSecretRef": map[string]any{"name": secret}}})
		},
		"Source strategy env": func(s map[string]any) {
			sourceStrategy(s)
			s["strategy"].(map[string]any)["sourceStrategy"].(map[string]any)["env"] = valueFrom("secretKeyRef", secret)
		},
		"Source strategy source.secrets": func(s map[string]any) {
			sourceStrategy(s)
			s["source"].(map[string]any)["secrets"] = []any{map[string]any{"secret": map[string]any{"name": secret}, "destinationDir": "creds"}}
		},
		"Source strategy pullSecret": func(s map[string]any) {
			sourceStrategy(s)
			s["strategy"].(map[string]any)["sourceStrategy"].(map[string]any)["pullSecret"] = map[string]any{"name": secret}
		},
	}
	configMapFields := map[string]func(map[string]any){
		"env configMapKeyRef":       func(s map[string]any) { docker(s)["env"] = valueFrom("configMapKeyRef", configMap) },
		"buildArgs configMapKeyRef": func(s map[string]any) { docker(s)["buildArgs"] = valueFrom("configMapKeyRef", configMap) },
		"source.configMaps": func(s map[string]any) {
			s["source"].(map[string]any)["configMaps"] = []any{map[string]any{"configMap": map[string]any{"name": configMap}}}
		},
		"configMap volume": func(s map[string]any) {
			docker(s)["volumes"] = volume(map[string]any{"type": "ConfigMap", "configMap": map[string]any{"name": configMap}})
		},
	}
	build := func(mut func(map[string]any)) *unstructured.Unstructured {
		spec := validSpec()
		mut(spec)
		o := object("Build", ns, "", spec)
		o.SetGenerateName("refs-")
		return o
	}
	create := func(c client.Client, o *unstructured.Unstructured) error {
		return c.Create(ctx, o.DeepCopy(), client.DryRunAll)
	}
	refused := func(what string, err error, words string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: %v, want Forbidden saying %q", what, err, words)
		}
	}
	secretDenied := fmt.Sprintf("alice may not get Secret %s in namespace %s", secret, ns)
	configMapDenied := fmt.Sprintf("alice may not get ConfigMap %s in namespace %s", configMap, ns)

	// The policy and alice's role are in force once a Build naming the
	// Secret is refused by the policy (RBAC alone would refuse it too,
	// without naming the Secret).
	eventually(t, "the policy refuses alice's Build naming "+secret, func() bool {
		err := create(alice, build(secretFields["pushSecret"]))
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), secretDenied)
	})
	if err := create(alice, build(func(map[string]any) {})); err != nil {
		t.Fatalf("alice's Build naming nothing: %v", err)
	}
	for name, mut := range secretFields {
		refused(name, create(alice, build(mut)), secretDenied)
	}
	for name, mut := range configMapFields {
		refused(name, create(alice, build(mut)), configMapDenied)
	}

	// Granted get on the two (a Role with resourceNames), alice may name
	// them anywhere.
	grantGet(t, ns, "alice", "secrets", secret)
	grantGet(t, ns, "alice", "configmaps", configMap)
	eventually(t, "alice may name "+secret+" once she may get it", func() bool {
		return create(alice, build(secretFields["pushSecret"])) == nil
	})
	for name, mut := range secretFields {
		if err := create(alice, build(mut)); err != nil {
			t.Errorf("%s with get on the Secret: %v", name, err)
		}
	}
	for name, mut := range configMapFields {
		if err := create(alice, build(mut)); err != nil {
			t.Errorf("%s with get on the ConfigMap: %v", name, err)
		}
	}
	// One name she may get does not carry another she may not.
	refused("a Build naming a readable and an unreadable Secret", create(alice, build(func(s map[string]any) {
		secretFields["pushSecret"](s)
		docker(s)["env"] = valueFrom("secretKeyRef", "team-c-token")
	})), fmt.Sprintf("alice may not get Secret team-c-token in namespace %s", ns))

	// More distinct Secrets than the policy can check are refused, saying
	// so; one Secret named many times is one.
	many := func(distinct int) *unstructured.Unstructured {
		return build(func(s map[string]any) {
			var env []any
			for i := range 20 {
				env = append(env, valueFrom("secretKeyRef", fmt.Sprintf("s%d", i%distinct))...)
			}
			docker(s)["env"] = env
		})
	}
	if err := create(alice, many(13)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec names 13 Secrets: at most 12 distinct Secrets") {
		t.Errorf("a Build naming 13 Secrets: %v, want Invalid saying at most 12", err)
	}
	refused("a Build naming s0 20 times", create(alice, many(1)), fmt.Sprintf("alice may not get Secret s0 in namespace %s", ns))

	// BuildConfigs: on create, and the names an update adds.
	author := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bc-author", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"build.openshift.io"}, Resources: []string{"buildconfigs"}, Verbs: []string{"create", "update", "get"}}}}
	if err := b.Client.Create(ctx, author); err != nil {
		t.Fatal(err)
	}
	bindRole(t, ns, "alice", "bc-author")
	bcSpec := validSpec()
	delete(bcSpec, "platforms")
	secretFields["pushSecret"](bcSpec)
	bc := object("BuildConfig", ns, "app", bcSpec)
	eventually(t, "alice may create a BuildConfig naming "+secret, func() bool { return create(alice, bc) == nil })
	if err := alice.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	bcSpec = bc.Object["spec"].(map[string]any)
	bcSpec["triggers"] = []any{map[string]any{"type": "GitHub", "github": map[string]any{"secretReference": map[string]any{"name": "team-c-hook"}}}}
	refused("a BuildConfig update adding a webhook trigger's secretReference", alice.Update(ctx, bc.DeepCopy(), client.DryRunAll),
		fmt.Sprintf("alice may not get Secret team-c-hook in namespace %s", ns))
	delete(bcSpec, "triggers")
	docker(bcSpec)["noCache"] = true
	if err := alice.Update(ctx, bc.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("a BuildConfig update that names no new Secret: %v", err)
	}

	// Without the policy's binding the refused Build goes through.
	if err := b.Client.Delete(ctx, objs["ValidatingAdmissionPolicyBinding/archway-build-references"]); err != nil {
		t.Fatal(err)
	}
	unreadable := build(func(s map[string]any) { docker(s)["env"] = valueFrom("secretKeyRef", "team-c-token") })
	eventually(t, "with the policy unbound, alice's Build naming team-c-token is allowed", func() bool {
		return create(alice, unreadable) == nil
	})
	// A Source build's source.secrets were refused by the policy, not by
	// anything else: unbound, it goes through too.
	if err := create(alice, build(func(s map[string]any) {
		sourceStrategy(s)
		s["source"].(map[string]any)["secrets"] = []any{map[string]any{"secret": map[string]any{"name": "team-c-token"}}}
	})); err != nil {
		t.Errorf("with the policy unbound, a Source Build naming team-c-token in source.secrets: %v", err)
	}
}

// grantGet lets user get one object of resource (core group) in ns.
func grantGet(t *testing.T, ns, user, resource, name string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "get-" + resource + "-" + name, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{resource}, ResourceNames: []string{name}, Verbs: []string{"get"}}}}
	if err := b.Client.Create(context.Background(), role); err != nil {
		t.Fatal(err)
	}
	bindRole(t, ns, user, role.Name)
}

// bindRole binds user to the Role name in ns.
func bindRole(t *testing.T, ns, user, name string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if err := b.Client.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}
