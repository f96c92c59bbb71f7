package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// nodeGroupsOf is NodeGroups fed with nodes, as node events would.
func nodeGroupsOf(nodes []corev1.Node) *NodeGroups {
	g := NewNodeGroups()
	for i := range nodes {
		g.Set(&nodes[i])
	}
	return g
}

// TestNodeGroups follows a cluster through node events and checks, after
// each, that resolution on the groups gives what it gives on every node.
func TestNodeGroups(t *testing.T) {
	all4 := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	// 400 nodes of four architectures, each with its own hostname.
	var cluster []corev1.Node
	for i := range 100 {
		for _, arch := range []string{"amd64", "arm64", "ppc64le", "s390x"} {
			name := fmt.Sprintf("%s-%d", arch, i)
			cluster = append(cluster, node(name).arch(arch).label(corev1.LabelHostname, name).label("zone", fmt.Sprint(i%3)).obj())
		}
	}
	byName := func(name string) int {
		for i := range cluster {
			if cluster[i].Name == name {
				return i
			}
		}
		t.Fatalf("no node %s", name)
		return -1
	}
	g := NewNodeGroups()
	for i := range cluster {
		g.Set(&cluster[i])
	}
	steps := []struct {
		name string
		do   func()
		// groups is how many groups the cluster has after the step.
		groups int
	}{
		{"400 nodes", func() {}, 12},
		{"every s390x node but one cordoned", func() {
			for i := 1; i < 100; i++ {
				n := &cluster[byName(fmt.Sprintf("s390x-%d", i))]
				n.Spec.Unschedulable = true
				g.Set(n)
			}
		}, 10},
		{"the last s390x node NotReady", func() {
			n := &cluster[byName("s390x-0")]
			n.Status.Conditions[0].Status = corev1.ConditionFalse
			g.Set(n)
		}, 9},
		{"an arm64 node tainted NoSchedule, another PreferNoSchedule", func() {
			n := &cluster[byName("arm64-5")]
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			g.Set(n)
			n = &cluster[byName("arm64-6")]
			n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			g.Set(n)
		}, 10},
		{"every ppc64le node deleted", func() {
			for i := range 100 {
				name := fmt.Sprintf("ppc64le-%d", i)
				cluster = append(cluster[:byName(name)], cluster[byName(name)+1:]...)
				g.Delete(name)
			}
		}, 7},
		{"an s390x node Ready again", func() {
			n := &cluster[byName("s390x-0")]
			n.Status.Conditions[0].Status = corev1.ConditionTrue
			g.Set(n)
		}, 8},
	}
	inputs := []struct {
		name string
		in   ResolveInput
	}{
		{"from nodes", ResolveInput{ArchNodeSelector: true}},
		{"four platforms", ResolveInput{Spec: all4, ArchNodeSelector: true}},
		{"four platforms, some allowed to fail", ResolveInput{Spec: all4, AllowedToFail: []string{"linux/s390x", "linux/ppc64le"}, ArchNodeSelector: true}},
		{"zone selector", ResolveInput{Spec: all4, NodeSelector: map[string]string{"zone": "1"}, ArchNodeSelector: true}},
		{"hostname selector", ResolveInput{Spec: all4, NodeSelector: map[string]string{corev1.LabelHostname: "arm64-5"}, ArchNodeSelector: true}},
		{"hostname selector, tolerated", ResolveInput{Spec: all4, NodeSelector: map[string]string{corev1.LabelHostname: "arm64-5"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}}, ArchNodeSelector: true}},
		{"hostname selector from nodes", ResolveInput{NodeSelector: map[string]string{corev1.LabelHostname: "amd64-7"}}},
		{"unknown hostname", ResolveInput{Spec: all4, NodeSelector: map[string]string{corev1.LabelHostname: "nowhere"}, ArchNodeSelector: true}},
	}
	for _, step := range steps {
		step.do()
		if got := len(g.groups); got != step.groups {
			t.Errorf("after %q: %d groups, want %d", step.name, got, step.groups)
		}
		for _, in := range inputs {
			all, grouped := in.in, in.in
			all.Nodes = cluster
			grouped.Nodes = g.Nodes(in.in.NodeSelector)
			want, got := Resolve(all), Resolve(grouped)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after %q, %s: resolution on the groups differs from the one on every node (-nodes +groups):\n%s", step.name, in.name, diff)
			}
		}
	}
}

// TestTrimNode checks the node cache keeps what resolution reads.
func TestTrimNode(t *testing.T) {
	n := node("n").arch("arm64").taint("k", corev1.TaintEffectNoExecute).cordoned().obj()
	n.Annotations = map[string]string{"big": "value"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"img"}, SizeBytes: 1}}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: "fine"})
	out, err := TrimNode(n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Node)
	if len(trimmed.Annotations) != 0 || len(trimmed.Status.Images) != 0 || len(trimmed.Status.Conditions) != 1 {
		t.Errorf("trimmed node keeps more than resolution reads: %+v", trimmed)
	}
	for _, in := range []ResolveInput{{ArchNodeSelector: true}, {Spec: []string{"linux/arm64"}, ArchNodeSelector: true}} {
		full, cut := in, in
		full.Nodes, cut.Nodes = []corev1.Node{n}, []corev1.Node{*trimmed}
		if diff := cmp.Diff(Resolve(full), Resolve(cut)); diff != "" {
			t.Errorf("resolution differs on the trimmed node:\n%s", diff)
		}
	}
}
