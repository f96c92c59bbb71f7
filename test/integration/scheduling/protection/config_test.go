package protection

import (
	"context"
	"strings"
	"testing"
	"time"

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
		{name: "group wildcard", obj: withSpec(group(func(g *schedulingv1alpha1.ProtectionGroup) { g.AuthorizedGroups = []string{"system:*"} })),
			want: "authorizedGroups entries are group names, matched exactly"},
		{name: "override for an hour", obj: withOverrideSpec(shipped.Spec, schedulingv1alpha1.ModeDisable, time.Hour)},
		{name: "override without until", obj: withOverrideSpec(shipped.Spec, schedulingv1alpha1.ModeDisable, 0),
			want: "spec.override.until: Required value"},
		{name: "override to Enable", obj: withOverrideSpec(shipped.Spec, schedulingv1alpha1.ModeEnable, time.Hour),
			want: "override.mode must be Disable or Inform: an override only relaxes"},
		{name: "override for 48 hours", obj: withOverrideSpec(shipped.Spec, schedulingv1alpha1.ModeDisable, 48*time.Hour),
			want: "ahead: an emergency override may last at most 24h0m0s; set "},
		{name: "override in the past", obj: withOverrideSpec(shipped.Spec, schedulingv1alpha1.ModeInform, -time.Minute),
			want: "is not in the future"},
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

// withOverrideSpec is spec with an override to mode lasting d from now (no
// until when d is 0).
func withOverrideSpec(spec schedulingv1alpha1.ControlPlaneProtectionSpec, mode schedulingv1alpha1.GroupMode, d time.Duration) *schedulingv1alpha1.ControlPlaneProtection {
	spec = *spec.DeepCopy()
	spec.Override = &schedulingv1alpha1.ProtectionOverride{Mode: mode, Reason: "test"}
	if d != 0 {
		spec.Override.Until = metav1.NewTime(time.Now().Add(d))
	}
	return withSpec(spec)
}
