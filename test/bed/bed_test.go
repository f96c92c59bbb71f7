package bed_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

func pod(ns, name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "example.invalid/app:1"}},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func onArch(arch string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: arch} }
}

// TestSchedulingOnArchNodes proves the scheduler and kwok nodes are real: pods
// pinned to an architecture land on its node, pods for a missing one stay
// Pending with the scheduler's reason, and scheduling gates hold pods back.
func TestSchedulingOnArchNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{WithoutRegistry: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	requestsBefore, err := b.APIRequests(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	cpuBefore, err := bed.ProcessCPU()
	g.Expect(err).NotTo(HaveOccurred())
	ns, err := b.CreateNamespace(ctx, "smoke")
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("the apiserver's request counters and the bed's CPU seconds are read", func(t *testing.T) {
		g := NewWithT(t)
		requests, err := b.APIRequests(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		requests = requests.Sub(requestsBefore)
		g.Expect(requests).To(HaveKeyWithValue("POST namespaces", 1.0), "%s", requests)
		g.Expect(requests.Writes()).To(BeNumerically(">=", 1))
		cpu, err := bed.ProcessCPU()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cpu).To(HaveKey("kube-apiserver"))
		g.Expect(cpu).To(HaveKey("etcd"))
		g.Expect(cpu["kube-apiserver"]).To(BeNumerically(">", cpuBefore["kube-apiserver"]))
	})

	t.Run("pinned pods land on the node of their architecture", func(t *testing.T) {
		g := NewWithT(t)
		for _, arch := range bed.DefaultArchitectures {
			g.Expect(b.Client.Create(ctx, pod(ns, "pinned-"+arch, onArch(arch)))).To(Succeed())
		}
		for _, arch := range bed.DefaultArchitectures {
			node, err := b.WaitPodBound(ctx, ns, "pinned-"+arch)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(node).To(Equal("node-" + arch + "-1"))
		}
		// kwok runs ordinary pods and never finishes them on its own.
		running := &corev1.Pod{}
		g.Expect(bed.WaitFor(ctx, b.Client, types.NamespacedName{Namespace: ns, Name: "pinned-s390x"}, running,
			func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })).To(Succeed())
		g.Consistently(func() corev1.PodPhase {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(running), running)
			return running.Status.Phase
		}).WithTimeout(time.Second).Should(Equal(corev1.PodRunning))
	})

	t.Run("a pod for an architecture with no node stays Pending with FailedScheduling", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(b.Client.Create(ctx, pod(ns, "riscv", onArch("riscv64")))).To(Succeed())
		g.Eventually(func() []string {
			events := &corev1.EventList{}
			g.Expect(b.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.InvolvedObject.Name == "riscv" {
					reasons = append(reasons, e.Reason+": "+e.Message)
				}
			}
			return reasons
		}).WithTimeout(bed.DefaultTimeout).Should(ContainElement(And(
			HavePrefix("FailedScheduling"), ContainSubstring("didn't match Pod's node affinity/selector"))))
		// The scheduler may publish the event before it writes the condition.
		p := &corev1.Pod{}
		g.Eventually(func(g Gomega) {
			g.Expect(b.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "riscv"}, p)).To(Succeed())
			g.Expect(p.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodScheduled),
				HaveField("Reason", corev1.PodReasonUnschedulable))))
		}).WithTimeout(bed.DefaultTimeout).Should(Succeed())
		g.Expect(p.Spec.NodeName).To(BeEmpty())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
	})

	t.Run("a gated pod waits until its gate is removed", func(t *testing.T) {
		g := NewWithT(t)
		gated := pod(ns, "gated", onArch("arm64"), func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
		})
		g.Expect(b.Client.Create(ctx, gated)).To(Succeed())
		g.Consistently(func() string {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(gated), gated)
			return gated.Spec.NodeName
		}).WithTimeout(2 * time.Second).Should(BeEmpty())
		g.Expect(gated.Status.Conditions).To(ContainElement(HaveField("Reason", corev1.PodReasonSchedulingGated)))
		gated.Spec.SchedulingGates = nil
		g.Expect(b.Client.Update(ctx, gated)).To(Succeed())
		node, err := b.WaitPodBound(ctx, ns, "gated")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node).To(Equal("node-arm64-1"))
	})

	t.Run("the control-plane node takes no ordinary pods", func(t *testing.T) {
		g := NewWithT(t)
		cp := pod(ns, "cp", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{bed.ControlPlaneLabel: ""}
		})
		g.Expect(b.Client.Create(ctx, cp)).To(Succeed())
		g.Consistently(func() string {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp)
			return cp.Spec.NodeName
		}).WithTimeout(2 * time.Second).Should(BeEmpty())
		tolerating := pod(ns, "cp-tolerating", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{bed.ControlPlaneLabel: ""}
			p.Spec.Tolerations = []corev1.Toleration{{Key: bed.ControlPlaneLabel, Operator: corev1.TolerationOpExists}}
		})
		g.Expect(b.Client.Create(ctx, tolerating)).To(Succeed())
		node, err := b.WaitPodBound(ctx, ns, "cp-tolerating")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node).To(Equal("control-plane-1"))
	})

	t.Run("manual pods are ended by the test, like a kubelet would", func(t *testing.T) {
		g := NewWithT(t)
		manual := pod(ns, "manual", onArch("ppc64le"), func(p *corev1.Pod) {
			p.Labels = map[string]string{bed.ManualPodLabel: "true"}
		})
		g.Expect(b.Client.Create(ctx, manual)).To(Succeed())
		_, err := b.WaitPodBound(ctx, ns, "manual")
		g.Expect(err).NotTo(HaveOccurred())
		g.Consistently(func() corev1.PodPhase {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(manual), manual)
			return manual.Status.Phase
		}).WithTimeout(time.Second).Should(Equal(corev1.PodPending))
		g.Expect(b.SetPodRunning(ctx, manual)).To(Succeed())
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(manual), manual)).To(Succeed())
		g.Expect(manual.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(b.SetPodFinished(ctx, manual, 3, "", "build failed")).To(Succeed())
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(manual), manual)).To(Succeed())
		g.Expect(manual.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(manual.Status.ContainerStatuses[0].State.Running).To(BeNil())
		g.Expect(manual.Status.ContainerStatuses[0].State.Terminated).To(And(
			HaveField("ExitCode", int32(3)), HaveField("Reason", "Error"), HaveField("Message", "build failed")))
		// A deleted pod that has ended goes away (kwok's delete stage).
		g.Expect(b.Client.Delete(ctx, manual)).To(Succeed())
		g.Expect(bed.WaitGone(ctx, b.Client, client.ObjectKeyFromObject(manual), &corev1.Pod{})).To(Succeed())
	})
}

// TestConfigurableNodes: counts per architecture, extra labels and taints,
// NotReady and cordoned nodes.
func TestConfigurableNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	nodes := append(bed.ArchNodes(2, "arm64"),
		bed.Node{Name: "amd64-not-ready", Arch: "amd64", NotReady: true},
		bed.Node{Name: "amd64-cordoned", Arch: "amd64", Unschedulable: true},
		bed.Node{Name: "s390x-gpu", Arch: "s390x", Labels: map[string]string{"example.com/gpu": "yes"},
			Taints: []corev1.Taint{{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}}},
	)
	b, err := bed.Start(ctx, bed.Options{WithoutRegistry: true, Nodes: nodes})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })

	list := &corev1.NodeList{}
	g.Expect(b.Client.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(5))
	ready := map[string]corev1.ConditionStatus{}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready[n.Name] = c.Status
			}
		}
		g.Expect(n.Status.NodeInfo.Architecture).To(Equal(n.Labels[corev1.LabelArchStable]))
	}
	g.Expect(ready).To(Equal(map[string]corev1.ConditionStatus{
		"node-arm64-1": corev1.ConditionTrue, "node-arm64-2": corev1.ConditionTrue,
		"amd64-not-ready": corev1.ConditionFalse, "amd64-cordoned": corev1.ConditionTrue,
		"s390x-gpu": corev1.ConditionTrue,
	}))

	ns, err := b.CreateNamespace(ctx, "nodes")
	g.Expect(err).NotTo(HaveOccurred())
	// Neither amd64 node can take the pod.
	g.Expect(b.Client.Create(ctx, pod(ns, "amd64", onArch("amd64")))).To(Succeed())
	// The s390x node takes only pods that tolerate its taint.
	g.Expect(b.Client.Create(ctx, pod(ns, "s390x", onArch("s390x")))).To(Succeed())
	g.Expect(b.Client.Create(ctx, pod(ns, "s390x-tolerating", onArch("s390x"), func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "example.com/gpu", Operator: corev1.TolerationOpExists}}
	}))).To(Succeed())
	// Two arm64 nodes share pods.
	for i := range 4 {
		g.Expect(b.Client.Create(ctx, pod(ns, fmt.Sprintf("arm64-%d", i), onArch("arm64")))).To(Succeed())
	}
	node, err := b.WaitPodBound(ctx, ns, "s390x-tolerating")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node).To(Equal("s390x-gpu"))
	for i := range 4 {
		node, err := b.WaitPodBound(ctx, ns, fmt.Sprintf("arm64-%d", i))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node).To(HavePrefix("node-arm64-"))
	}
	for _, name := range []string{"amd64", "s390x"} {
		p := &corev1.Pod{}
		g.Consistently(func() string {
			_ = b.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)
			return p.Spec.NodeName
		}).WithTimeout(time.Second).Should(BeEmpty(), "pod %s", name)
	}
}

// TestStopLeavesNothingBehind: after Stop no child process runs and no port
// of the bed listens.
func TestStopLeavesNothingBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{ControllerManager: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(childCommands()).To(HaveLen(6), "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, registry")
	ports := b.Addresses()
	g.Expect(ports).NotTo(BeEmpty())
	for _, p := range ports {
		conn, err := net.DialTimeout("tcp", p, time.Second)
		g.Expect(err).NotTo(HaveOccurred(), "port %s should listen while the bed runs", p)
		_ = conn.Close()
	}
	dir := b.Dir
	g.Expect(b.Stop()).To(Succeed())
	for _, p := range ports {
		_, err := net.DialTimeout("tcp", p, time.Second)
		g.Expect(err).To(HaveOccurred(), "port %s still listens", p)
	}
	_, err = os.Stat(dir)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "bed directory %s is left behind", dir)
	g.Expect(childCommands()).To(BeEmpty(), "child processes left running")
}

// childCommands lists the command lines of this process's children.
func childCommands() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	me := fmt.Sprint(os.Getpid())
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Field 4 of stat is the parent pid; the command may hold spaces, so
		// split after its closing parenthesis.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(fields) > 1 && fields[1] == me {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			out = append(out, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
