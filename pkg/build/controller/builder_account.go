package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BuilderClusterRole is the ClusterRole (manifests/rbac/builder_role.yaml)
// the builder service account is bound to in each namespace that runs
// builds, by a RoleBinding of the same name.
const BuilderClusterRole = "archway-builder"

// Each namespace that runs builds gets the builder service account and the
// RoleBinding of archway-builder to it, made by the controller when
// missing. RBAC's escalation check lets build-controller create that
// RoleBinding because it holds every permission of archway-builder: keep
// manifests/build-controller/rbac/role.yaml a superset of builder_role.yaml
// (TestInstall in test/e2e/install fails otherwise).

// BuilderAccount is what a namespace needs for its build pods to run as the
// builder service account: the service account, and a RoleBinding of
// BuilderClusterRole to it (and to nothing else), both labelled as
// build-controller's.
func BuilderAccount(namespace, serviceAccount string) (*corev1.ServiceAccount, *rbacv1.RoleBinding) {
	labels := map[string]string{"app.kubernetes.io/managed-by": "archway-build-controller"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: namespace, Labels: labels}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BuilderClusterRole, Namespace: namespace, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: BuilderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}},
	}
	return sa, rb
}

// builderAccounts remembers the namespaces whose builder account this
// process has ensured, so that it is created once per namespace, not per
// build; it only creates (never reads: no cache of service accounts or
// RoleBindings is needed).
type builderAccounts struct {
	mu      sync.Mutex
	ensured map[string]bool
}

// ensure creates the builder service account and its RoleBinding in
// namespace when they do not exist. An existing RoleBinding of that name
// is left as it is (an administrator may have narrowed it).
func (a *builderAccounts) ensure(ctx context.Context, c client.Client, namespace, serviceAccount string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := namespace + "/" + serviceAccount
	if a.ensured[key] {
		return nil
	}
	sa, rb := BuilderAccount(namespace, serviceAccount)
	for _, o := range []client.Object{sa, rb} {
		if err := c.Create(ctx, o, client.FieldOwner(FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the builder's %T %s/%s: %w", o, namespace, o.GetName(), err)
		}
	}
	if a.ensured == nil {
		a.ensured = map[string]bool{}
	}
	a.ensured[key] = true
	return nil
}

// forget makes the next ensure in namespace create again (a build pod was
// refused for want of its service account).
func (a *builderAccounts) forget(namespace string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.ensured {
		if strings.HasPrefix(k, namespace+"/") {
			delete(a.ensured, k)
		}
	}
}
