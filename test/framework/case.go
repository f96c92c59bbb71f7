package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

// Case is one test's share of the suite: a namespace of its own and a
// context bounded by bed.CaseTimeout. Cases in namespaces of their own
// that change nothing cluster-wide may run in parallel (t.Parallel).
type Case struct {
	Ctx context.Context
	NS  string
}

// NewCase creates a namespace named prefix-<random> for t. When t ends,
// the pods still running in it are reported ended (as their kubelet would,
// so that kwok lets them go) and the namespace is deleted.
func (s *Suite) NewCase(t testing.TB, prefix string) *Case {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	t.Cleanup(cancel)
	ns, err := s.Bed.CreateNamespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DeleteNamespace(ns) })
	return &Case{Ctx: ctx, NS: ns}
}

// DeleteNamespace ends the running pods of namespace ns (as their kubelet
// would, so that kwok lets them go) and deletes it.
func (s *Suite) DeleteNamespace(ns string) {
	ctx := context.Background()
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				_ = s.Bed.SetPodFinished(ctx, p, 137, "Error", "test ended")
			}
		}
	}
	_ = s.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}
