package binary

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBuildStarterRole: a user bound to archway:build-starter runs
// start-build, describe build, logs and cancel-build in the namespace; a
// user without it is refused each (the apiserver's 403), and nothing is
// started or cancelled.
func TestBuildStarterRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "starter-role")
	h.buildConfig("app", true)
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "archway:build-starter"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}}}
	if err := testBed.Client.Create(h.ctx, rb); err != nil {
		t.Fatal(err)
	}
	as := func(user string, args ...string) (string, error) {
		return h.plugin(testBed.Kubeconfig, append(args, "--as", user, "--as-group", "system:authenticated")...)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("bob %s: %v, want forbidden", what, err)
		}
	}

	_, err := as("bob", "start-build", "app")
	forbidden("start-build", err)
	if names := h.builds(); len(names) != 0 {
		t.Fatalf("bob started %v", names)
	}
	if out, err := as("alice", "start-build", "app"); err != nil || out != "build.build.openshift.io/app-1 started\n" {
		t.Fatalf("alice start-build: %v, %q", err, out)
	}
	if out, err := as("alice", "describe", "build", "app-1"); err != nil || !strings.Contains(out, "app-1") {
		t.Errorf("alice describe: %v, %q", err, out)
	}
	_, err = as("bob", "describe", "build", "app-1")
	forbidden("describe", err)
	// No controller runs here: the build has no pod, which alice may see.
	if _, err := as("alice", "logs", "build/app-1"); err == nil || !strings.Contains(err.Error(), "has no pod with logs yet") {
		t.Errorf("alice logs: %v", err)
	}
	_, err = as("bob", "logs", "build/app-1")
	forbidden("logs", err)
	_, err = as("bob", "cancel-build", "app-1")
	forbidden("cancel-build", err)
	if h.build("app-1").Status.Cancelled {
		t.Fatal("bob cancelled app-1")
	}
	if out, err := as("alice", "cancel-build", "app-1"); err != nil || out != "build.build.openshift.io/app-1 cancelled\n" {
		t.Errorf("alice cancel-build: %v, %q", err, out)
	}
	if !h.build("app-1").Status.Cancelled {
		t.Error("app-1 not cancelled")
	}
}
