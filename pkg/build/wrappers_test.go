package build

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeWrapper builds test nodes: node("n1").arch("arm64").notReady().obj().
type nodeWrapper struct{ corev1.Node }

func node(name string) *nodeWrapper {
	return &nodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}}
}

func (w *nodeWrapper) arch(a string) *nodeWrapper { w.Labels[corev1.LabelArchStable] = a; return w }
func (w *nodeWrapper) os(o string) *nodeWrapper   { w.Labels[corev1.LabelOSStable] = o; return w }
func (w *nodeWrapper) label(k, v string) *nodeWrapper {
	w.Labels[k] = v
	return w
}
func (w *nodeWrapper) notReady() *nodeWrapper {
	w.Status.Conditions[0].Status = corev1.ConditionFalse
	return w
}
func (w *nodeWrapper) cordoned() *nodeWrapper { w.Spec.Unschedulable = true; return w }
func (w *nodeWrapper) taint(key string, effect corev1.TaintEffect) *nodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return w
}
func (w *nodeWrapper) obj() corev1.Node { return *w.Node.DeepCopy() }

// fourArches is the bed's default cluster: one node per architecture plus
// a tainted control-plane node.
func fourArches() []corev1.Node {
	return []corev1.Node{
		node("amd").obj(), node("arm").arch("arm64").obj(), node("ppc").arch("ppc64le").obj(),
		node("s390").arch("s390x").obj(),
		node("cp").label("node-role.kubernetes.io/control-plane", "").taint("node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule).obj(),
	}
}
