package policy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// podWrapper builds test pods: makePod(ns, "p").label("app", "x").obj().
type podWrapper struct{ pod *corev1.Pod }

func makePod(ns, name string) *podWrapper {
	return &podWrapper{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}},
		},
	}}
}

func (w *podWrapper) label(k, v string) *podWrapper {
	if w.pod.Labels == nil {
		w.pod.Labels = map[string]string{}
	}
	w.pod.Labels[k] = v
	return w
}

func (w *podWrapper) image(img string) *podWrapper {
	w.pod.Spec.Containers[0].Image = img
	return w
}

func (w *podWrapper) nodeSelector(k, v string) *podWrapper {
	if w.pod.Spec.NodeSelector == nil {
		w.pod.Spec.NodeSelector = map[string]string{}
	}
	w.pod.Spec.NodeSelector[k] = v
	return w
}

func (w *podWrapper) requiredTerms(terms ...corev1.NodeSelectorTerm) *podWrapper {
	w.pod.Spec.Affinity = requiredAffinity(terms...)
	return w
}

func (w *podWrapper) obj() *corev1.Pod { return w.pod }

func requiredAffinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// newNamespace creates a namespace with labels and deletes it at the end.
func newNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(prefix, "-") + "-", Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// createPolicy creates a policy, waits until the webhook's informer cache
// holds it (so pods created next see it), and deletes it at the end.
func createPolicy(t testing.TB, p client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating %s: %v", p.GetName(), err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	waitCached(t, p)
}

// waitCached waits until the webhook's cache holds p with its current spec
// (its generation) or a later one.
func waitCached(t testing.TB, p client.Object) {
	t.Helper()
	cached := p.DeepCopyObject().(client.Object)
	if err := bed.WaitFor(context.Background(), webhookMgr.GetClient(), client.ObjectKeyFromObject(p), cached, func(o client.Object) bool {
		// The same object with this spec or a later one: others (the
		// placement controller's finalizer and status) may have written
		// it since, and the cache may never hold p's own version.
		return o.GetUID() == p.GetUID() && o.GetGeneration() >= p.GetGeneration()
	}); err != nil {
		t.Fatalf("the webhook's cache never saw %s: %v", p.GetName(), err)
	}
}

func nsPolicy(ns, name string, prio int32, sel *metav1.LabelSelector, c kupidv1alpha1.SchedulingCriteria) *kupidv1alpha1.PodSchedulingPolicy {
	return &kupidv1alpha1.PodSchedulingPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       kupidv1alpha1.PodSchedulingPolicySpec{PodSelector: sel, Priority: prio, SchedulingCriteria: c},
	}
}

func clusterPolicy(name string, prio int32, nsSel, podSel *metav1.LabelSelector, c kupidv1alpha1.SchedulingCriteria) *kupidv1alpha1.ClusterPodSchedulingPolicy {
	return &kupidv1alpha1.ClusterPodSchedulingPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kupidv1alpha1.ClusterPodSchedulingPolicySpec{NamespaceSelector: nsSel, PodSelector: podSel, Priority: prio, SchedulingCriteria: c},
	}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// createPod creates pod and returns it as the apiserver stored it (the
// create response, after every admission webhook).
func createPod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	stored := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// inNamespace selects the namespace named ns.
func inNamespace(ns string) *metav1.LabelSelector {
	return matchLabels(corev1.LabelMetadataName, ns)
}
