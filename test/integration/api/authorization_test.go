package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

// installManifests creates the objects of the repository's YAML files and
// deletes them when the test ends.
func installManifests(t *testing.T, paths ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	objs := map[string]*unstructured.Unstructured{}
	for _, path := range paths {
		data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), path))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := b.Client.Create(ctx, u); err != nil {
				t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			objs[u.GetKind()+"/"+u.GetName()] = u
			t.Cleanup(func() { _ = b.Client.Delete(context.Background(), u) })
		}
	}
	return objs
}

// as is a client acting as user, an authenticated user with no group but
// system:authenticated.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(b.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: b.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant binds user to a ClusterRole in ns.
func grant(t *testing.T, ns, user, clusterRole string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "grant-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := b.Client.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// eventually polls until ok holds (RBAC and admission policies take effect
// through informers, a moment after they are written).
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, bed.DefaultTimeout, true,
		func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("never: %s", what)
	}
}

// TestBuildAuthorization installs manifests/authorization and acts as a
// tenant who may create Builds and BuildConfigs in a namespace: a strategy
// is refused with OpenShift's message until the tenant holds its role, and
// a service account other than builder until the tenant may use it. With
// the policy's binding gone, the same creates go through (so the test can
// fail).
func TestBuildAuthorization(t *testing.T) {
	ctx := context.Background()
	objs := installManifests(t, "manifests/authorization/build_strategy_policy.yaml", "manifests/authorization/build_strategy_roles.yaml")
	// The restricted set-up: the default grant to every authenticated user
	// removed, as an administrator would.
	for _, name := range []string{"archway:build-strategy-docker", "archway:build-strategy-source"} {
		if err := b.Client.Delete(ctx, objs["ClusterRoleBinding/"+name]); err != nil {
			t.Fatal(err)
		}
	}
	ns := newNamespace(t)
	author := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-build-author"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"build.openshift.io"}, Resources: []string{"builds", "buildconfigs"}, Verbs: []string{"create", "update", "get"}}}}
	if err := b.Client.Create(ctx, author); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	grant(t, ns, "alice", "test-build-author")
	alice := as(t, "alice")

	withSpec := func(kind string, mut func(map[string]any)) *unstructured.Unstructured {
		spec := validSpec()
		if kind == "BuildConfig" {
			delete(spec, "platforms")
		}
		if mut != nil {
			mut(spec)
		}
		o := object(kind, ns, "", spec)
		o.SetGenerateName("auth-")
		return o
	}
	source := func(s map[string]any) {
		s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "builder:1"}}}
	}
	serviceAccount := func(name string) func(map[string]any) {
		return func(s map[string]any) { s["serviceAccount"] = name }
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

	// The policy is in force, alice's grant too, and the removed default
	// grants are gone, once alice's Docker and Source builds are both
	// refused by the policy (not by RBAC: the grant not yet seen).
	eventually(t, "the build strategy policy refuses Docker and Source builds", func() bool {
		dockerErr, sourceErr := create(alice, withSpec("Build", nil)), create(alice, withSpec("Build", source))
		return apierrors.IsForbidden(dockerErr) && strings.Contains(dockerErr.Error(), "build strategy Docker is not allowed") &&
			apierrors.IsForbidden(sourceErr) && strings.Contains(sourceErr.Error(), "build strategy Source is not allowed")
	})
	for _, kind := range []string{"Build", "BuildConfig"} {
		refused(kind+" of strategy Docker without the role", create(alice, withSpec(kind, nil)), "build strategy Docker is not allowed")
		refused(kind+" of strategy Source without the role", create(alice, withSpec(kind, source)), "build strategy Source is not allowed")
	}

	grant(t, ns, "alice", "archway:build-strategy-docker")
	eventually(t, "alice's Docker build is allowed with archway:build-strategy-docker", func() bool {
		return create(alice, withSpec("Build", nil)) == nil
	})
	for _, kind := range []string{"Build", "BuildConfig"} {
		if err := create(alice, withSpec(kind, nil)); err != nil {
			t.Errorf("%s of strategy Docker with the role: %v", kind, err)
		}
		refused(kind+" of strategy Source with only the Docker role", create(alice, withSpec(kind, source)), "build strategy Source is not allowed")
	}
	if err := create(as(t, "bob"), withSpec("Build", nil)); !apierrors.IsForbidden(err) {
		t.Errorf("bob, who holds no role in the namespace, created a Build: %v", err)
	}

	// A BuildConfig that changes its strategy is checked again.
	bc := withSpec("BuildConfig", nil)
	if err := alice.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	source(bc.Object["spec"].(map[string]any))
	refused("a BuildConfig changed to strategy Source", alice.Update(ctx, bc, client.DryRunAll), "build strategy Source is not allowed")

	// Service accounts: none or builder, else only one alice may use.
	for _, sa := range []string{"", "builder"} {
		if err := create(alice, withSpec("Build", serviceAccount(sa))); err != nil {
			t.Errorf("a Build with serviceAccount %q: %v", sa, err)
		}
	}
	for _, kind := range []string{"Build", "BuildConfig"} {
		refused(kind+" as service account deployer", create(alice, withSpec(kind, serviceAccount("deployer"))),
			"spec.serviceAccount: alice may not use service account deployer in namespace "+ns)
	}
	useDeployer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "use-deployer", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"deployer"}, Verbs: []string{"use"}}}}
	if err := b.Client.Create(ctx, useDeployer); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "use-deployer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "use-deployer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice may use deployer once granted", func() bool {
		return create(alice, withSpec("Build", serviceAccount("deployer"))) == nil
	})
	refused("a Build as service account admin", create(alice, withSpec("Build", serviceAccount("admin"))), "may not use service account admin")

	// Without the policy's binding the refused creates go through.
	if err := b.Client.Delete(ctx, objs["ValidatingAdmissionPolicyBinding/archway-build-strategy"]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "with the policy unbound, alice's Source build and service account admin are allowed", func() bool {
		return create(alice, withSpec("Build", source)) == nil && create(alice, withSpec("Build", serviceAccount("admin"))) == nil
	})
}

// TestBuildAuthorizationDefaults: with the shipped ClusterRoleBindings,
// every authenticated user who may create Builds may create Docker and
// Source ones, as in OpenShift.
func TestBuildAuthorizationDefaults(t *testing.T) {
	ctx := context.Background()
	installManifests(t, "manifests/authorization/build_strategy_policy.yaml", "manifests/authorization/build_strategy_roles.yaml")
	ns := newNamespace(t)
	author := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-build-author"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"build.openshift.io"}, Resources: []string{"builds", "buildconfigs"}, Verbs: []string{"create", "update", "get"}}}}
	if err := b.Client.Create(ctx, author); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	grant(t, ns, "carol", "test-build-author")
	carol := as(t, "carol")
	spec := validSpec()
	spec["serviceAccount"] = "deployer"
	// The policy is in force, carol's grant and both default strategy
	// grants too, once carol's Docker and Source Builds as deployer are
	// refused by the policy for the service account alone (it checks the
	// strategy first): a refusal by RBAC (a grant not yet seen by the
	// authorizer) is also Forbidden, and says nothing of either.
	sourceSpec := validSpec()
	sourceSpec["serviceAccount"] = "deployer"
	sourceSpec["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "builder:1"}}}
	eventually(t, "the policy refuses carol's Builds as deployer for the service account", func() bool {
		for _, s := range []map[string]any{spec, sourceSpec} {
			err := carol.Create(ctx, object("Build", ns, "as-deployer", s), client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not use service account deployer") {
				return false
			}
		}
		return true
	})
	for _, kind := range []string{"Build", "BuildConfig"} {
		for _, strategy := range []map[string]any{
			{"type": "Docker", "dockerStrategy": map[string]any{}},
			{"type": "Source", "sourceStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "builder:1"}}},
		} {
			s := validSpec()
			s["strategy"] = strategy
			if kind == "BuildConfig" {
				delete(s, "platforms")
			}
			if err := carol.Create(ctx, object(kind, ns, "default-"+strings.ToLower(kind), s), client.DryRunAll); err != nil {
				t.Errorf("%s of strategy %s: %v", kind, strategy["type"], err)
			}
		}
	}
}
