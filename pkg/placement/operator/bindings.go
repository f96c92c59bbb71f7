package operator

import (
	"context"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// binding is the ClusterRoleBinding that gives component (the name of its
// service account in namespace, and of its ClusterRole) its cluster-wide
// rights. It is owned by the ClusterRole it binds (role's UID), so that
// deleting the ClusterRole (uninstalling) deletes it too, whether or not
// the operator still runs. The policy archway-placement-operand-bindings
// refuses the operator any other binding.
func binding(component, namespace string, role types.UID) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:   component,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "archway-placement-operator"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole", Name: component, UID: role,
			}},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: component},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: component}},
	}
}

// sameBinding says whether got grants what want does, to whom.
func sameBinding(got, want *rbacv1.ClusterRoleBinding) bool {
	return got.RoleRef == want.RoleRef && slices.Equal(got.Subjects, want.Subjects)
}

// ensureBinding makes component's binding exist as binding() says: made
// when missing, made again when it binds anything else.
func (r *reconciler) ensureBinding(ctx context.Context, component string) error {
	role := &rbacv1.ClusterRole{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: component}, role); err != nil {
		return err
	}
	want := binding(component, r.namespace, role.UID)
	got := &rbacv1.ClusterRoleBinding{}
	switch err := r.reader.Get(ctx, client.ObjectKey{Name: component}, got); {
	case err == nil && sameBinding(got, want):
		return nil
	case err == nil:
		// The role reference cannot change: delete it and bind again.
		if err := r.client.Delete(ctx, got, client.Preconditions{UID: &got.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	return client.IgnoreAlreadyExists(r.client.Create(ctx, want))
}

// deleteBinding deletes component's binding; it reports whether one was
// still there.
func (r *reconciler) deleteBinding(ctx context.Context, component string) (bool, error) {
	got := &rbacv1.ClusterRoleBinding{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: component}, got); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, client.IgnoreNotFound(r.client.Delete(ctx, got, client.Preconditions{UID: &got.UID}))
}
