package protection

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// The shipped config is valid; bad configs are refused by the CRD's rules
// with messages that say what to fix.
func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	shipped, err := shippedConfig()
	if err != nil {
		t.Fatal(err)
	}
	group := func(mutate func(g *schedulingv1alpha1.ProtectionGroup)) schedulingv1alpha1.ControlPlaneProtectionSpec {
		g := shipped.Spec.Groups[0]
		g.AuthorizedUsers = append([]string(nil), g.AuthorizedUsers...)
		mutate(&g)
		return schedulingv1alpha1.ControlPlaneProtectionSpec{Groups: []schedulingv1alpha1.ProtectionGroup{g}}
	}
	cases := []struct {
		name string
		obj  *schedulingv1alpha1.ControlPlaneProtection
		want string // empty: valid
	}{
		{name: "shipped", obj: shipped},
		{name: "not a singleton", obj: &schedulingv1alpha1.ControlPlaneProtection{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: shipped.Spec},
			want: "ControlPlaneProtection is a singleton: metadata.name must be 'cluster'"},
		{name: "lone wildcard", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.AuthorizedUsers = append(g.AuthorizedUsers, "*") })),
			want: "a lone '*' would authorize everybody: use mode Disable instead"},
		{name: "bad service account entry", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.AuthorizedUsers = append(g.AuthorizedUsers, "a/b/c") })),
			want: "must be namespace/serviceaccount"},
		{name: "empty selector", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.LabelSelector = &metav1.LabelSelector{} })),
			want: "labelSelector must not be empty"},
		{name: "unknown mode", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.Mode = "Enforce" })),
			want: `Unsupported value: "Enforce"`},
		{name: "unknown group", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.Name = "GPU" })),
			want: `Unsupported value: "GPU"`},
		{name: "duplicate entry", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) {
			g.AuthorizedUsers = append(g.AuthorizedUsers, g.AuthorizedUsers[0])
		})), want: "Duplicate value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.obj.DeepCopy()
			obj.ResourceVersion = ""
			err := k8s.Create(ctx, obj, client.DryRunAll)
			if apierrors.IsAlreadyExists(err) {
				// Another case made the singleton: judge an update of it.
				current := &schedulingv1alpha1.ControlPlaneProtection{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
					t.Fatal(err)
				}
				obj.ResourceVersion = current.ResourceVersion
				err = k8s.Update(ctx, obj, client.DryRunAll)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func withSpec(spec schedulingv1alpha1.ControlPlaneProtectionSpec) *schedulingv1alpha1.ControlPlaneProtection {
	return &schedulingv1alpha1.ControlPlaneProtection{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: spec}
}
