package node

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

// TestRealNodeRunsAPod runs a busybox pod from the bed's registry on the real
// node: containerd pulls the image by its index, runc runs the container in
// the pod's network namespace, and the kubelet reports its exit and serves
// its log.
func TestRealNodeRunsAPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	ns := createNamespace(ctx, t)
	pod := nodePod(ns, "hello", corev1.Container{
		Name:    "hello",
		Image:   testBed.BaseImage,
		Command: []string{"sh", "-c", "echo hello from $(uname -m); cat /proc/self/uid_map"},
	})
	done := runOnNode(ctx, t, pod)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod ended %s: %+v", done.Status.Phase, done.Status.ContainerStatuses)
	}
	cs := done.Status.ContainerStatuses[0]
	if !strings.Contains(cs.ImageID, "@sha256:") {
		t.Errorf("imageID %q names no digest", cs.ImageID)
	}
	if !strings.HasPrefix(cs.ContainerID, "containerd://") {
		t.Errorf("containerID %q is not containerd's", cs.ContainerID)
	}
	logs := podLogs(ctx, t, ns, pod.Name, "hello")
	if !strings.Contains(logs, "hello from x86_64") && !strings.Contains(logs, "hello from") {
		t.Errorf("log %q lacks the container's output", logs)
	}
	t.Logf("log: %s", logs)
}

// TestUserNamespaces runs a pod with hostUsers: false: the container's
// root is mapped to an unprivileged range of the host, as /proc/self/uid_map
// inside it shows.
func TestUserNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	ns := createNamespace(ctx, t)
	pod := nodePod(ns, "userns", corev1.Container{
		Name:    "userns",
		Image:   testBed.BaseImage,
		Command: []string{"cat", "/proc/self/uid_map"},
	})
	pod.Spec.HostUsers = ptr.To(false)
	done := runOnNode(ctx, t, pod)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod ended %s: %+v", done.Status.Phase, done.Status.ContainerStatuses)
	}
	uidMap := strings.Fields(podLogs(ctx, t, ns, pod.Name, "userns"))
	if len(uidMap) != 3 || uidMap[0] != "0" || uidMap[1] == "0" || uidMap[2] != "65536" {
		t.Fatalf("uid_map %q: want 0 <host id other than 0> 65536", uidMap)
	}
}

// nodePod is a pod of one container bound to the real node, never
// restarted.
func nodePod(ns, name string, c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:      testBed.Node.Name,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{c},
		},
	}
}

// runOnNode creates the pod and waits until it has ended.
func runOnNode(ctx context.Context, t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := testBed.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return waitPodDone(ctx, t, pod.Namespace, pod.Name)
}

func createNamespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ns, err := testBed.CreateNamespace(ctx, "node-")
	if err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission plugin refuses pods until
	// kube-controller-manager has made the namespace's default account.
	var sa corev1.ServiceAccount
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Namespace: ns, Name: "default"}, &sa, func(*corev1.ServiceAccount) bool { return true }); err != nil {
		t.Fatalf("default service account of %s: %v", ns, err)
	}
	return ns
}

func waitPodDone(ctx context.Context, t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Namespace: ns, Name: name}, &pod, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v (status %+v)\nthe node's log lines about it:\n%s", ns, name, err, pod.Status, nodeLogLines(ns, name))
	}
	return &pod
}

// nodeLogLines are the kubelet's and containerd's log lines that name the
// pod, and containerd's errors, to tell why a pod did not run.
func nodeLogLines(ns, name string) string {
	var out strings.Builder
	for _, part := range []string{"kubelet", "containerd"} {
		data, err := os.ReadFile(testBed.LogPath(part))
		if err != nil {
			fmt.Fprintf(&out, "%s: %v\n", part, err)
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, ns+"/"+name) || strings.Contains(line, `"`+name+`"`) ||
				(part == "containerd" && strings.Contains(line, "level=error")) {
				fmt.Fprintf(&out, "%s: %s\n", part, line)
			}
		}
	}
	return out.String()
}

func podLogs(ctx context.Context, t *testing.T, ns, name, container string) string {
	t.Helper()
	data, err := testBed.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(data)
}

// TestPodsReachTheAPIServer runs client-go's in-cluster configuration in a
// pod: the kubelet names the kubernetes Service in the pod's environment and
// mounts the service account's token and CA, kube-proxy leads the Service's
// cluster IP to the apiserver on the node's address, and the apiserver
// takes the token as the pod's service account.
func TestPodsReachTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	image, err := testBed.PushProgramImage(ctx, "./test/bed/cmd/whoami", "tests/whoami:v1", runtime.GOARCH, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(ctx, t)
	pod := nodePod(ns, "whoami", corev1.Container{Name: "whoami", Image: image})
	done := runOnNode(ctx, t, pod)
	logs := podLogs(ctx, t, ns, pod.Name, "whoami")
	want := "user system:serviceaccount:" + ns + ":default"
	if done.Status.Phase != corev1.PodSucceeded || strings.TrimSpace(logs) != want {
		t.Fatalf("pod %s, log %q; want Succeeded and %q", done.Status.Phase, logs, want)
	}
}

// TestExecFormatError runs an image that says linux/amd64 but whose
// entrypoint is a program for an architecture this machine has no
// interpreter for: the real runtime fails the container with "exec format
// error", which is what placement's exec-format-error monitor reads.
func TestExecFormatError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	foreign := foreignArch(t)
	image, err := testBed.PushProgramImage(ctx, "./test/bed/cmd/pause", "tests/mislabelled:"+foreign, foreign, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(ctx, t)
	pod := nodePod(ns, "mislabelled", corev1.Container{Name: "main", Image: image})
	done := runOnNode(ctx, t, pod)
	if done.Status.Phase != corev1.PodFailed || len(done.Status.ContainerStatuses) == 0 || done.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("pod %s: %+v", done.Status.Phase, done.Status.ContainerStatuses)
	}
	// runc reports the failed exec of the entrypoint on the container's
	// stderr, with exit code 255 and no termination message.
	term := done.Status.ContainerStatuses[0].State.Terminated
	log := podLogs(ctx, t, ns, pod.Name, "main")
	if term.ExitCode != 255 || !strings.Contains(log, "exec format error") {
		t.Fatalf("container ended with %d, log %q; want 255 and exec format error", term.ExitCode, log)
	}
}

// foreignArch is a GOARCH that this machine's kernel cannot run: no
// binfmt_misc handler (qemu) is registered for it.
func foreignArch(t *testing.T) string {
	t.Helper()
	for _, c := range []struct{ goarch, qemu string }{{"riscv64", "riscv64"}, {"loong64", "loongarch64"}, {"mips64le", "mips64el"}} {
		if c.goarch == runtime.GOARCH {
			continue
		}
		if _, err := os.Stat("/proc/sys/fs/binfmt_misc/qemu-" + c.qemu); os.IsNotExist(err) {
			return c.goarch
		}
	}
	t.Fatal("every candidate architecture has a binfmt_misc handler here: none gives exec format error")
	return ""
}
