package protection

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

const cpLabel = "node-role.kubernetes.io/control-plane"

// The bed's nodes: one control-plane node (amd64) and workers.
var testNodes = []Node{
	{Name: "control-plane-1", Labels: map[string]string{cpLabel: "", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "control-plane-1"}},
	{Name: "node-amd64-1", Labels: map[string]string{"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "node-amd64-1"}},
	{Name: "node-arm64-1", Labels: map[string]string{"kubernetes.io/arch": "arm64", "kubernetes.io/hostname": "node-arm64-1"}},
}

type podWrapper struct{ pod *corev1.Pod }

func makePod(ns, name string) *podWrapper {
	return &podWrapper{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

func (w *podWrapper) nodeName(n string) *podWrapper { w.pod.Spec.NodeName = n; return w }
func (w *podWrapper) sa(n string) *podWrapper       { w.pod.Spec.ServiceAccountName = n; return w }
func (w *podWrapper) tolerate(key string, op corev1.TolerationOperator, effect corev1.TaintEffect) *podWrapper {
	w.pod.Spec.Tolerations = append(w.pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Effect: effect})
	return w
}
func (w *podWrapper) selector(k, v string) *podWrapper {
	if w.pod.Spec.NodeSelector == nil {
		w.pod.Spec.NodeSelector = map[string]string{}
	}
	w.pod.Spec.NodeSelector[k] = v
	return w
}
func (w *podWrapper) terms(terms ...corev1.NodeSelectorTerm) *podWrapper {
	w.pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
	return w
}
func (w *podWrapper) obj() *corev1.Pod { return w.pod.DeepCopy() }

func config(mode schedulingv1alpha1.GroupMode, authorized ...string) *schedulingv1alpha1.ControlPlaneProtection {
	return &schedulingv1alpha1.ControlPlaneProtection{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: schedulingv1alpha1.ControlPlaneProtectionSpec{Groups: []schedulingv1alpha1.ProtectionGroup{{
			Name: schedulingv1alpha1.ControlPlane, LabelSelector: DefaultLabelSelector(), Mode: mode, AuthorizedUsers: authorized,
		}}},
	}
}

func create(user string, pod *corev1.Pod) Request {
	return Request{Operation: OpCreate, User: user, Namespace: pod.Namespace, Name: pod.Name, Pod: pod}
}

func withGroups(cfg *schedulingv1alpha1.ControlPlaneProtection, groups ...string) *schedulingv1alpha1.ControlPlaneProtection {
	cfg.Spec.Groups[0].AuthorizedGroups = groups
	return cfg
}

func inGroups(r Request, groups ...string) Request {
	r.Groups = groups
	return r
}

func TestDecide(t *testing.T) {
	const alice = "alice"
	scheduler := "system:kube-scheduler"
	authorized := []string{"system:kube-scheduler", "kube-system/default", "system:serviceaccount:ops:runner", "ops/runner", "system:node:*"}
	cpToleration := makePod("team", "p").tolerate(cpLabel, corev1.TolerationOpExists, corev1.TaintEffectNoSchedule)
	cases := []struct {
		name      string
		cfg       *schedulingv1alpha1.ControlPlaneProtection
		req       Request
		want      Result
		wantPaths []PathKind
	}{
		{name: "no config", cfg: nil, req: create(alice, cpToleration.obj())},
		{name: "Disable evaluates nothing", cfg: config(schedulingv1alpha1.ModeDisable), req: create(alice, cpToleration.obj()), want: ResultDisabled},
		{name: "a plain pod has no path", cfg: config(schedulingv1alpha1.ModeEnable), req: create(alice, makePod("team", "p").obj()), want: ResultNoPath},
		{
			name: "toleration of the control-plane taint, Enable", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req: create(alice, cpToleration.obj()), want: ResultDenied, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "toleration of the control-plane taint, Inform", cfg: config(schedulingv1alpha1.ModeInform, authorized...),
			req: create(alice, cpToleration.obj()), want: ResultWarned, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "legacy master taint, NoExecute", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").tolerate("node-role.kubernetes.io/master", corev1.TolerationOpExists, corev1.TaintEffectNoExecute).obj()),
			want: ResultDenied, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "toleration with no effect tolerates both effects", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").tolerate(cpLabel, corev1.TolerationOpExists, "").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "empty-key Exists wildcard", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").tolerate("", corev1.TolerationOpExists, "").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "PreferNoSchedule toleration is no path", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").tolerate(cpLabel, corev1.TolerationOpExists, corev1.TaintEffectPreferNoSchedule).obj()),
			want: ResultNoPath,
		},
		{
			name: "Equal with a value the taint does not have is no path", cfg: config(schedulingv1alpha1.ModeEnable),
			req: create(alice, func() *corev1.Pod {
				p := makePod("team", "p").obj()
				p.Spec.Tolerations = []corev1.Toleration{{Key: cpLabel, Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
				return p
			}()),
			want: ResultNoPath,
		},
		{
			name: "wildcard toleration pinned to arm64 nodes cannot reach the amd64 control plane", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").tolerate("", corev1.TolerationOpExists, "").selector("kubernetes.io/arch", "arm64").obj()),
			want: ResultNoPath,
		},
		{
			name: "a DaemonSet pod for a worker (matchFields) is no path", cfg: config(schedulingv1alpha1.ModeEnable),
			req: create("system:serviceaccount:kube-system:daemon-set-controller", makePod("team", "ds-x").tolerate("", corev1.TolerationOpExists, "").
				terms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-amd64-1"}}}}).obj()),
			want: ResultNoPath,
		},
		{
			name: "a DaemonSet pod for the control-plane node, by the controller, in an unauthorized namespace", cfg: config(schedulingv1alpha1.ModeEnable, "kube-system/daemon-set-controller"),
			req: create("system:serviceaccount:kube-system:daemon-set-controller", makePod("team", "ds-y").tolerate("", corev1.TolerationOpExists, "").
				terms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"control-plane-1"}}}}).obj()),
			want: ResultDenied, wantPaths: []PathKind{PathToleration, PathNodeSelection},
		},
		{
			name: "a DaemonSet pod for the control-plane node in kube-system", cfg: config(schedulingv1alpha1.ModeEnable, "kube-system/daemon-set-controller"),
			req: create("system:serviceaccount:kube-system:daemon-set-controller", makePod("kube-system", "ds-y").tolerate("", corev1.TolerationOpExists, "").
				terms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"control-plane-1"}}}}).obj()),
			want: ResultAuthorized, wantPaths: []PathKind{PathToleration, PathNodeSelection},
		},
		{
			name: "a member of an authorized group names the node, in any namespace (kubectl debug node)", cfg: withGroups(config(schedulingv1alpha1.ModeEnable, authorized...), "system:masters"),
			req:  inGroups(create("root-admin", makePod("team", "node-debugger").nodeName("control-plane-1").tolerate("", corev1.TolerationOpExists, "").obj()), "system:authenticated", "system:masters"),
			want: ResultAuthorized, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "a group matches exactly: no member of system:masters", cfg: withGroups(config(schedulingv1alpha1.ModeEnable, authorized...), "system:masters"),
			req:  inGroups(create(alice, makePod("team", "p").nodeName("control-plane-1").obj()), "system:authenticated", "system:master", "system:masters-x"),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "nodeSelector for control-plane nodes only, no toleration", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").selector(cpLabel, "").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeSelection},
		},
		{
			name: "affinity that also matches workers is no path", cfg: config(schedulingv1alpha1.ModeEnable),
			req: create(alice, makePod("team", "p").terms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			}}).obj()),
			want: ResultNoPath,
		},
		{
			name: "affinity Exists on the role label reaches only the control plane", cfg: config(schedulingv1alpha1.ModeEnable),
			req: create(alice, makePod("team", "p").terms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: cpLabel, Operator: corev1.NodeSelectorOpExists},
			}}).obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeSelection},
		},
		{
			name: "nodeName of the control-plane node", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  create(alice, makePod("team", "p").nodeName("control-plane-1").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "nodeName of a worker, with the wildcard toleration", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  create(alice, makePod("team", "p").nodeName("node-amd64-1").tolerate("", corev1.TolerationOpExists, "").obj()),
			want: ResultNoPath,
		},
		{
			name: "an authorized requester in an unauthorized namespace", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  create("system:serviceaccount:ops:runner", makePod("team", "p").nodeName("control-plane-1").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "an authorized requester in an authorized namespace (any service account of it)", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  create("system:serviceaccount:ops:runner", makePod("ops", "p").sa("other").nodeName("control-plane-1").obj()),
			want: ResultAuthorized, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "a service account entry authorizes that account only, not its namespace's others", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  create("system:serviceaccount:ops:intruder", makePod("ops", "p").nodeName("control-plane-1").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "a user entry does not authorize a namespace", cfg: config(schedulingv1alpha1.ModeEnable, "alice"),
			req:  create(alice, makePod("alice", "p").nodeName("control-plane-1").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "kubelets by prefix: a mirror pod in kube-system", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  create("system:node:control-plane-1", makePod("kube-system", "etcd-control-plane-1").nodeName("control-plane-1").obj()),
			want: ResultAuthorized, wantPaths: []PathKind{PathNodeName},
		},
		{
			name: "binding to the control-plane node by the scheduler", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  Request{Operation: OpBind, User: scheduler, Namespace: "kube-system", Name: "p", BindingNode: "control-plane-1"},
			want: ResultAuthorized, wantPaths: []PathKind{PathBinding},
		},
		{
			name: "binding to the control-plane node by another scheduler", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  Request{Operation: OpBind, User: "system:serviceaccount:team:my-scheduler", Namespace: "kube-system", Name: "p", BindingNode: "control-plane-1"},
			want: ResultDenied, wantPaths: []PathKind{PathBinding},
		},
		{
			name: "the scheduler binding a pod of an unauthorized namespace", cfg: config(schedulingv1alpha1.ModeEnable, authorized...),
			req:  Request{Operation: OpBind, User: scheduler, Namespace: "team", Name: "p", BindingNode: "control-plane-1"},
			want: ResultDenied, wantPaths: []PathKind{PathBinding},
		},
		{
			name: "binding to a worker", cfg: config(schedulingv1alpha1.ModeEnable),
			req:  Request{Operation: OpBind, User: "anyone", Namespace: "team", Name: "p", BindingNode: "node-amd64-1"},
			want: ResultNoPath,
		},
		{
			name: "an update that keeps an existing path is judged on nothing new", cfg: config(schedulingv1alpha1.ModeEnable),
			req: Request{Operation: OpUpdate, User: "system:serviceaccount:kube-system:generic-garbage-collector", Namespace: "team", Name: "p",
				Pod: makePod("team", "p").nodeName("control-plane-1").obj(), OldPod: makePod("team", "p").nodeName("control-plane-1").obj()},
			want: ResultNoPath,
		},
		{
			name: "an update that adds a toleration", cfg: config(schedulingv1alpha1.ModeEnable),
			req: Request{Operation: OpUpdate, User: alice, Namespace: "team", Name: "p",
				Pod: cpToleration.obj(), OldPod: makePod("team", "p").obj()},
			want: ResultDenied, wantPaths: []PathKind{PathToleration},
		},
		{
			name: "a custom selector protects other nodes", cfg: func() *schedulingv1alpha1.ControlPlaneProtection {
				c := config(schedulingv1alpha1.ModeEnable)
				c.Spec.Groups[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/arch": "arm64"}}
				return c
			}(),
			req:  create(alice, makePod("team", "p").nodeName("node-arm64-1").obj()),
			want: ResultDenied, wantPaths: []PathKind{PathNodeName},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.cfg, testNodes, tc.req)
			if tc.cfg == nil {
				if len(got) != 0 {
					t.Fatalf("got %+v, want no decision", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d decisions, want 1", len(got))
			}
			d := got[0]
			if d.Result != tc.want {
				t.Errorf("result %s, want %s (paths %v)", d.Result, tc.want, d.Paths)
			}
			var kinds []PathKind
			for _, p := range d.Paths {
				kinds = append(kinds, p.Kind)
			}
			if !slices.Equal(kinds, tc.wantPaths) {
				t.Errorf("paths %v, want %v", kinds, tc.wantPaths)
			}
			if (d.Result == ResultDenied || d.Result == ResultWarned) != (d.Message != "") {
				t.Errorf("message %q for result %s", d.Message, d.Result)
			}
		})
	}
}

// The message names the group, what in the pod reaches it, who is not
// authorized and the entries that would authorize them.
func TestDecideMessage(t *testing.T) {
	pod := makePod("team", "web").sa("builder").tolerate(cpLabel, corev1.TolerationOpExists, corev1.TaintEffectNoSchedule).obj()
	d := Decide(config(schedulingv1alpha1.ModeEnable), testNodes, create("system:serviceaccount:team:deployer", pod))[0]
	for _, want := range []string{
		"creating pod team/web", "protected node group ControlPlane (mode Enable)",
		`toleration {key "node-role.kubernetes.io/control-plane", operator Exists, effect NoSchedule} (protected nodes: control-plane-1)`,
		`the requesting user "system:serviceaccount:team:deployer" and the pod's namespace "team"`,
		`adds "team/deployer" and "team/builder" to spec.groups[name=ControlPlane].authorizedUsers of ControlPlaneProtection "cluster"`,
		"otherwise remove the toleration from the pod",
	} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q\nlacks %q", d.Message, want)
		}
	}
}

func TestSelectionOperators(t *testing.T) {
	node := Node{Name: "n", Labels: map[string]string{"a": "1", "b": "x"}}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	cases := []struct {
		term corev1.NodeSelectorTerm
		want bool
	}{
		{req("a", corev1.NodeSelectorOpIn, "1", "2"), true},
		{req("a", corev1.NodeSelectorOpIn, "2"), false},
		{req("a", corev1.NodeSelectorOpNotIn, "2"), true},
		{req("missing", corev1.NodeSelectorOpNotIn, "2"), true},
		{req("a", corev1.NodeSelectorOpExists), true},
		{req("missing", corev1.NodeSelectorOpDoesNotExist), true},
		{req("a", corev1.NodeSelectorOpGt, "0"), true},
		{req("a", corev1.NodeSelectorOpLt, "0"), false},
		{req("b", corev1.NodeSelectorOpGt, "0"), false},
		{corev1.NodeSelectorTerm{}, false},
		{corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"m"}}}}, true},
	}
	for i, tc := range cases {
		pod := makePod("ns", "p").terms(tc.term).obj()
		if got := selectionMatches(pod, node); got != tc.want {
			t.Errorf("case %d %+v: %v, want %v", i, tc.term, got, tc.want)
		}
	}
}
