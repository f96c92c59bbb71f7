package bed

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ControlPlaneLabel marks the bed's control-plane node.
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// NotReadyLabel marks nodes kwok keeps NotReady (see kwok/stages.yaml).
	NotReadyLabel = "bed.archway.dev/not-ready"
	// kwokNodeAnnotation is the annotation kwok uses to recognise its nodes.
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// DefaultArchitectures are the architectures of the default bed's nodes.
var DefaultArchitectures = []string{"amd64", "arm64", "ppc64le", "s390x"}

// Node describes one kwok node of the bed.
type Node struct {
	// Name is the node's name and kubernetes.io/hostname.
	Name string
	// Arch is kubernetes.io/arch (and status.nodeInfo.architecture).
	Arch string
	// OS is kubernetes.io/os; empty means linux.
	OS string
	// Labels are added to the standard ones.
	Labels map[string]string
	// Taints are set on the node.
	Taints []corev1.Taint
	// NotReady keeps the node's Ready condition False and gives it the
	// node.kubernetes.io/not-ready:NoSchedule taint, as the node lifecycle
	// controller would.
	NotReady bool
	// Unschedulable cordons the node.
	Unschedulable bool
}

// ArchNodes returns count Ready linux nodes for each architecture, named
// node-<arch>-<i>.
func ArchNodes(count int, arches ...string) []Node {
	var nodes []Node
	for _, arch := range arches {
		for i := 1; i <= count; i++ {
			nodes = append(nodes, Node{Name: fmt.Sprintf("node-%s-%d", arch, i), Arch: arch})
		}
	}
	return nodes
}

// ControlPlaneNode is an amd64 node with the control-plane role label and
// its NoSchedule taint.
func ControlPlaneNode(name string) Node {
	return Node{
		Name:   name,
		Arch:   "amd64",
		Labels: map[string]string{ControlPlaneLabel: ""},
		Taints: []corev1.Taint{{Key: ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule}},
	}
}

// DefaultNodes is one Ready node per architecture in DefaultArchitectures plus
// one control-plane node.
func DefaultNodes() []Node {
	return append(ArchNodes(1, DefaultArchitectures...), ControlPlaneNode("control-plane-1"))
}

// object is the Node object kwok will manage for n.
func (n Node) object() *corev1.Node {
	os := n.OS
	if os == "" {
		os = "linux"
	}
	labels := map[string]string{
		corev1.LabelArchStable: n.Arch,
		corev1.LabelOSStable:   os,
		corev1.LabelHostname:   n.Name,
		"type":                 "kwok",
	}
	maps.Copy(labels, n.Labels)
	taints := append([]corev1.Taint(nil), n.Taints...)
	if n.NotReady {
		labels[NotReadyLabel] = "true"
		taints = append(taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	}
	if n.Unschedulable {
		taints = append(taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: taints, Unschedulable: n.Unschedulable},
	}
}

// AddNodes creates nodes for kwok to manage and waits until kwok has
// initialised them (Ready, or NotReady when asked).
func (b *Bed) AddNodes(ctx context.Context, nodes ...Node) error {
	for _, n := range nodes {
		if n.Name == "" || n.Arch == "" {
			return fmt.Errorf("bed: node %+v needs a Name and an Arch", n)
		}
		if _, err := b.Clientset.CoreV1().Nodes().Create(ctx, n.object(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bed: creating node %s: %w", n.Name, err)
		}
	}
	for _, n := range nodes {
		want := corev1.ConditionTrue
		if n.NotReady {
			want = corev1.ConditionFalse
		}
		err := waitFor(ctx, b.kwok, "kwok to initialise node "+n.Name, func(ctx context.Context) error {
			node, err := b.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == want {
					return nil
				}
			}
			return fmt.Errorf("node %s is not %s=%s yet", n.Name, corev1.NodeReady, want)
		})
		if err != nil {
			return err
		}
	}
	b.Nodes = append(b.Nodes, nodes...)
	return nil
}
