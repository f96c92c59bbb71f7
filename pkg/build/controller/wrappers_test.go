package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
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
func (w *nodeWrapper) obj() corev1.Node { return *w.DeepCopy() }

// fourArches is the bed's default cluster: one node per architecture plus
// a tainted control-plane node.
func fourArches() []corev1.Node {
	return []corev1.Node{
		node("amd").obj(), node("arm").arch("arm64").obj(), node("ppc").arch("ppc64le").obj(),
		node("s390").arch("s390x").obj(),
		node("cp").label("node-role.kubernetes.io/control-plane", "").taint("node-role.kubernetes.io/control-plane", corev1.TaintEffectNoSchedule).obj(),
	}
}

// buildWrapper builds test Builds: makeBuild("app").platforms("linux/amd64").obj().
type buildWrapper struct{ buildv1.Build }

func makeBuild(name string) *buildWrapper {
	return &buildWrapper{buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Strategy: buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType},
			Output:   buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}},
		}},
	}}
}

func (w *buildWrapper) platforms(ps ...string) *buildWrapper { w.Spec.Platforms = ps; return w }
func (w *buildWrapper) allowFail(ps ...string) *buildWrapper {
	w.Spec.PlatformsAllowedToFail = ps
	return w
}

// source makes the Build a Source build with builder as its builder image.
func (w *buildWrapper) source(builder string) *buildWrapper {
	w.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: builder}}}
	return w
}
func (w *buildWrapper) noOutput() *buildWrapper { w.Spec.Output.To = nil; return w }
func (w *buildWrapper) output(ref string) *buildWrapper {
	w.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: ref}
	return w
}
func (w *buildWrapper) pushSecret(name string) *buildWrapper {
	w.Spec.Output.PushSecret = &corev1.LocalObjectReference{Name: name}
	return w
}
func (w *buildWrapper) nodeSelector(kv ...string) *buildWrapper {
	w.Spec.NodeSelector = buildv1.OptionalNodeSelector{}
	for i := 0; i+1 < len(kv); i += 2 {
		w.Spec.NodeSelector[kv[i]] = kv[i+1]
	}
	return w
}
func (w *buildWrapper) cancelled() *buildWrapper { w.Status.Cancelled = true; return w }
func (w *buildWrapper) phase(p buildv1.BuildPhase) *buildWrapper {
	w.Status.Phase = p
	return w
}
func (w *buildWrapper) entry(p string, phase buildv1.BuildPhase, reason buildv1.StatusReason) *buildWrapper {
	w.Status.Platforms = append(w.Status.Platforms, buildv1.BuildStatusPlatform{Platform: p, Phase: phase, Reason: reason})
	return w
}
func (w *buildWrapper) obj() *buildv1.Build { return w.DeepCopy() }

// podWrapper builds test pods: makePod("app-build-linux-amd64").running().obj().
type podWrapper struct{ corev1.Pod }

func makePod(name string) *podWrapper {
	return &podWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

func (w *podWrapper) running() *podWrapper { w.Status.Phase = corev1.PodRunning; return w }
func (w *podWrapper) exited(code int32, reason, msg string) *podWrapper {
	w.Status.Phase = corev1.PodFailed
	if code == 0 {
		w.Status.Phase = corev1.PodSucceeded
	}
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "docker-build", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}}
	return w
}
func (w *podWrapper) evicted() *podWrapper {
	w.Status.Phase, w.Status.Reason, w.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	return w
}
func (w *podWrapper) deleting() *podWrapper {
	now := metav1.Now()
	w.DeletionTimestamp = &now
	return w
}
func (w *podWrapper) obj() *corev1.Pod { return w.DeepCopy() }

func podsOf(pods ...*corev1.Pod) map[string]*corev1.Pod {
	m := map[string]*corev1.Pod{}
	for _, p := range pods {
		m[p.Name] = p
	}
	return m
}
