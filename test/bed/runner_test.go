package bed_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

// shImage is the image the runner tests map to /bin/sh.
const shImage = "example.invalid/bed/sh:1"

// runnerTimeout bounds each wait of the runner tests: pods start in well
// under a second, but the machine may be busy.
const runnerTimeout = 90 * time.Second

// TestPodRunner runs pods bound to kwok nodes as processes: env, volumes at
// their mountPaths, termination messages, init containers, deletion,
// `kubectl logs`, and a runner restart that runs nothing twice. The host's
// mount table never shows the pods' mounts.
func TestPodRunner(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	hostMounts := mountTable(t)
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Runner:          &bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "runner")
	g.Expect(err).NotTo(HaveOccurred())
	shared := t.TempDir()

	t.Run("env, volumes at their mountPaths, working dir, termination message and exit code", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(b.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
		})).To(Succeed())
		g.Expect(b.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
			Data:       map[string][]byte{"token": []byte("s3cret")},
		})).To(Succeed())
		g.Expect(b.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"},
			Data:       map[string]string{"mode": "fast", "level": "3"},
		})).To(Succeed())
		script := fmt.Sprintf(`
check() { [ "$2" = "$3" ] || { printf '%%s: got %%s, want %%s' "$1" "$2" "$3" >/dev/termination-log; exit 1; }; }
check TOKEN "$TOKEN" s3cret
check MODE "$MODE" fast
check CFG_level "$CFG_level" 3
check POD_NAME "$POD_NAME" env
check POD_NAMESPACE "$POD_NAMESPACE" %s
check NODE "$NODE" node-arm64-1
check POD_IP "$POD_IP" 127.0.0.1
check GREETING "$GREETING" "hello env on node-arm64-1"
check dockerconfig "$(cat /var/run/secrets/archway/push/.dockerconfigjson)" '{"auths":{}}'
check settings "$(cat /var/run/archway-bed/settings/mode)" fast
check podinfo "$(cat /var/run/archway-bed/podinfo/name)" env
check pwd "$(pwd)" /var/run/archway-bed/scratch
if touch /var/run/secrets/archway/push/x 2>/dev/null; then echo "the secret volume is writable" >/dev/termination-log; exit 1; fi
echo scratch >scratch.txt
echo "all checks passed"
echo "a line on stderr" >&2
printf 'exit three' >/dev/termination-log
exit 3
`, ns)
		pod := runnerPod(ns, "env", "arm64", script, func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.WorkingDir = "/var/run/archway-bed/scratch"
			c.Env = []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
				{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
				fieldEnv("POD_NAME", "metadata.name"),
				fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("NODE", "spec.nodeName"),
				fieldEnv("POD_IP", "status.podIP"),
				{Name: "GREETING", Value: "hello $(POD_NAME) on $(NODE)"},
			}
			c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
			p.Spec.Volumes = []corev1.Volume{
				{Name: "push", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "push"}}},
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}
			c.VolumeMounts = []corev1.VolumeMount{
				{Name: "push", MountPath: "/var/run/secrets/archway/push", ReadOnly: true},
				{Name: "settings", MountPath: "/var/run/archway-bed/settings"},
				{Name: "podinfo", MountPath: "/var/run/archway-bed/podinfo"},
				{Name: "scratch", MountPath: "/var/run/archway-bed/scratch"},
			}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed), "status: %+v", done.Status)
		g.Expect(done.Status.ContainerStatuses).To(HaveLen(1))
		cs := done.Status.ContainerStatuses[0]
		g.Expect(cs.State.Running).To(BeNil())
		g.Expect(cs.State.Terminated).To(And(
			HaveField("ExitCode", int32(3)), HaveField("Reason", "Error"), HaveField("Message", "exit three")))
		g.Expect(done.Status.StartTime).NotTo(BeNil())
		g.Expect(done.Status.PodIP).To(Equal("127.0.0.1"))
		g.Expect(done.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionFalse), HaveField("Reason", "PodCompleted"))))

		// The files were the pod's alone.
		_, err := os.Stat("/var/run/secrets/archway/push/.dockerconfigjson")
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "the secret is visible on the host")
		scratch, err := os.ReadFile(filepath.Join(b.Runner.PodDir(done), "volumes", "scratch", "scratch.txt"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(scratch)).To(Equal("scratch\n"))

		out, err := b.Runner.ContainerLog(done, "main")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(And(ContainSubstring("all checks passed\n"), ContainSubstring("a line on stderr\n")))
		logs, err := kubectl(ctx, b, "logs", "-n", ns, "env")
		g.Expect(err).NotTo(HaveOccurred(), logs)
		g.Expect(logs).To(Equal(out))
		logs, err = kubectl(ctx, b, "logs", "-n", ns, "env", "-c", "main", "--tail", "1", "--timestamps")
		g.Expect(err).NotTo(HaveOccurred(), logs)
		g.Expect(logs).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z (all checks passed|a line on stderr)\n$`))
		logs, err = kubectl(ctx, b, "logs", "-n", ns, "env", "--limit-bytes=3")
		g.Expect(err).NotTo(HaveOccurred(), logs)
		g.Expect(logs).To(HaveLen(3))
	})

	t.Run("a failing container's message falls back to its log", func(t *testing.T) {
		g := NewWithT(t)
		pod := runnerPod(ns, "fallback", "s390x", `exec 2>&1; echo "step 1"; echo "no space left" >&2; exit 2`, func(p *corev1.Pod) {
			p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			// Archway's build pods carry this label instead of the manual one.
			p.Labels = map[string]string{"openshift.io/build.name": "b1"}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated).To(And(
			HaveField("ExitCode", int32(2)), HaveField("Message", "step 1\nno space left\n")))
	})

	t.Run("two pods at once see their own files at the same mountPath", func(t *testing.T) {
		g := NewWithT(t)
		// Each pod marks its start in a shared hostPath and waits for the
		// other's mark, so both run at once, then reads its secret.
		script := `me=$(cat /var/run/secrets/archway/same/name)
: >"/var/run/archway-bed/shared/$me"
i=0
while [ ! -e "/var/run/archway-bed/shared/$OTHER" ]; do
	i=$((i+1)); [ $i -lt 1200 ] || { echo "$OTHER never started" >/dev/termination-log; exit 1; }
	sleep 0.05
done
printf '%s' "$(cat /var/run/secrets/archway/same/name)" >/dev/termination-log`
		for name, other := range map[string]string{"left": "right", "right": "left"} {
			g.Expect(b.Client.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "same-" + name},
				Data:       map[string][]byte{"name": []byte(name)},
			})).To(Succeed())
			g.Expect(b.Client.Create(ctx, runnerPod(ns, "same-"+name, "amd64", script, func(p *corev1.Pod) {
				c := &p.Spec.Containers[0]
				c.Env = []corev1.EnvVar{{Name: "OTHER", Value: other}}
				p.Spec.Volumes = []corev1.Volume{
					{Name: "same", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "same-" + name}}},
					{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}},
				}
				c.VolumeMounts = []corev1.VolumeMount{
					{Name: "same", MountPath: "/var/run/secrets/archway/same"},
					{Name: "shared", MountPath: "/var/run/archway-bed/shared"},
				}
			}))).To(Succeed())
		}
		for _, name := range []string{"left", "right"} {
			done := waitPod(t, b, runnerPod(ns, "same-"+name, "", ""), podEnded)
			g.Expect(done.Status.ContainerStatuses[0].State.Terminated.Message).To(Equal(name))
			g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded))
		}
	})

	t.Run("init containers run first, in order", func(t *testing.T) {
		g := NewWithT(t)
		pod := runnerPod(ns, "init", "ppc64le", `echo main >>/var/run/archway-bed/work/order; cat /var/run/archway-bed/work/order >/dev/termination-log`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			mounts := []corev1.VolumeMount{{Name: "work", MountPath: "/var/run/archway-bed/work"}}
			p.Spec.Containers[0].VolumeMounts = mounts
			for _, name := range []string{"init-1", "init-2"} {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
					Name: name, Image: shImage, Command: []string{"sh", "-c", "sleep 0.2; echo " + name + " >>/var/run/archway-bed/work/order"},
					VolumeMounts: mounts,
				})
			}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated).To(And(
			HaveField("Reason", "Completed"), HaveField("Message", "init-1\ninit-2\nmain\n")))
		g.Expect(done.Status.InitContainerStatuses).To(HaveLen(2))
		for _, cs := range done.Status.InitContainerStatuses {
			g.Expect(cs.State.Terminated).To(HaveField("Reason", "Completed"), cs.Name)
		}
		g.Expect(done.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodInitialized), HaveField("Status", corev1.ConditionTrue))))

		failing := runnerPod(ns, "init-fails", "ppc64le", `echo main ran`, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: shImage, Command: []string{"sh", "-c", "exit 4"}}}
		})
		g.Expect(b.Client.Create(ctx, failing)).To(Succeed())
		done = waitPod(t, b, failing, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(done.Status.InitContainerStatuses[0].State.Terminated).To(HaveField("ExitCode", int32(4)))
		g.Expect(done.Status.ContainerStatuses[0].State.Waiting).To(HaveField("Reason", "PodInitializing"))
		_, err := os.Stat(b.Runner.LogPath(done, "main"))
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "the main container ran after a failed init container")
	})

	t.Run("the last container's end comes with the pod's phase, in one status write", func(t *testing.T) {
		// main ends first and the test sees it before it lets second end;
		// then both end at once, released together once both run.
		for _, together := range []bool{false, true} {
			g := NewWithT(t)
			name := fmt.Sprintf("one-write-%t", together)
			release := filepath.Join(shared, name)
			wait := `while [ ! -e /var/run/archway-bed/shared/` + name + ` ]; do sleep 0.05; done`
			mounts := []corev1.VolumeMount{{Name: "shared", MountPath: "/var/run/archway-bed/shared"}}
			first := "exit 0"
			if together {
				first = wait
			}
			pod := runnerPod(ns, name, "s390x", first, func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}}}
				p.Spec.Containers[0].VolumeMounts = mounts
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
					Name: "second", Image: shImage, Command: []string{"sh", "-c", wait}, VolumeMounts: mounts,
				})
			})
			w, err := b.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
			count := func(s corev1.PodStatus, running bool) int {
				n := 0
				for _, cs := range s.ContainerStatuses {
					if (running && cs.State.Running != nil) || (!running && cs.State.Terminated != nil) {
						n++
					}
				}
				return n
			}
			// Every status the pod had, from its creation to its end.
			var seen []corev1.PodStatus
			timeout := time.After(runnerTimeout)
			for len(seen) == 0 || !podEnded(&corev1.Pod{Status: seen[len(seen)-1]}) {
				select {
				case ev, ok := <-w.ResultChan():
					g.Expect(ok).To(BeTrue(), "the watch ended")
					p, isPod := ev.Object.(*corev1.Pod)
					if !isPod {
						continue
					}
					seen = append(seen, p.Status)
					if (!together && count(p.Status, false) == 1) || (together && count(p.Status, true) == 2) {
						g.Expect(os.WriteFile(release, nil, 0o644)).To(Succeed())
					}
				case <-timeout:
					t.Fatalf("the pod did not end: %+v", seen)
				}
			}
			w.Stop()
			g.Expect(seen[len(seen)-1].Phase).To(Equal(corev1.PodSucceeded))
			for _, s := range seen[:len(seen)-1] {
				g.Expect(count(s, false)).To(BeNumerically("<", 2), "every container's end was written before the pod's phase: %+v", s)
			}
		}
	})

	t.Run("kubectl logs -f follows the container to its end", func(t *testing.T) {
		g := NewWithT(t)
		pod := runnerPod(ns, "follow", "arm64", `echo "line 1"; sleep 3; echo "line 2"`)
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		waitPod(t, b, pod, podRunning)
		start := time.Now()
		logs, err := kubectl(ctx, b, "logs", "-f", "-n", ns, "follow")
		g.Expect(err).NotTo(HaveOccurred(), logs)
		g.Expect(logs).To(Equal("line 1\nline 2\n"))
		g.Expect(time.Since(start)).To(BeNumerically(">", 500*time.Millisecond), "-f returned before the container ended")
		waitPod(t, b, pod, podEnded)
	})

	t.Run("deleting a running pod kills its processes and the pod goes", func(t *testing.T) {
		g := NewWithT(t)
		// The shell and its sleep ignore SIGTERM: SIGKILL after the grace
		// period ends them.
		pod := runnerPod(ns, "sleeper", "s390x", `trap "" TERM; echo started; sleep 601.25; echo never`, func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		running := waitPod(t, b, pod, podRunning)
		g.Eventually(func() []int { return processesWith("sleep\x00601.25\x00") }).
			WithTimeout(runnerTimeout).Should(HaveLen(1))
		g.Expect(b.Client.Delete(ctx, running)).To(Succeed())
		wctx, cancel := context.WithTimeout(ctx, runnerTimeout)
		defer cancel()
		g.Expect(bed.WaitGone(wctx, b.Client, client.ObjectKeyFromObject(pod), &corev1.Pod{})).To(Succeed())
		g.Expect(processesWith("sleep\x00601.25\x00")).To(BeEmpty())
		out, err := b.Runner.ContainerLog(running, "main")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(Equal("started\n"))
	})

	t.Run("activeDeadlineSeconds ends a pod with DeadlineExceeded", func(t *testing.T) {
		g := NewWithT(t)
		pod := runnerPod(ns, "deadline", "amd64", `sleep 604.5`, func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptr.To(int64(1))
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(done.Status.Reason).To(Equal("DeadlineExceeded"))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated).To(HaveField("ExitCode", int32(143)))
		g.Expect(processesWith("sleep\x00604.5\x00")).To(BeEmpty())
	})

	t.Run("a container waits for a missing Secret, then runs", func(t *testing.T) {
		g := NewWithT(t)
		pod := runnerPod(ns, "late", "arm64", `printf '%s' "$LATE" >/dev/termination-log`, func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LATE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "late"}, Key: "value"}}}}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		waiting := waitPod(t, b, pod, func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
		})
		g.Expect(waiting.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(waiting.Status.ContainerStatuses[0].State.Waiting.Message).To(ContainSubstring(`"late" not found`))
		g.Expect(b.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
			Data:       map[string][]byte{"value": []byte("here now")},
		})).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated.Message).To(Equal("here now"))
	})

	t.Run("projected volumes hold a service account token", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(b.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder"}})).To(Succeed())
		script := `tok=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)
printf '%s %s' "$(echo "$tok" | tr -cd . | wc -c)" "$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)" >/dev/termination-log`
		pod := runnerPod(ns, "token", "amd64", script, func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = "builder"
			p.Spec.Volumes = []corev1.Volume{{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3600))}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				},
			}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "api", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), "status: %+v", done.Status)
		// A JWT has three dot-separated parts.
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated.Message).To(Equal("2 " + ns))
	})

	t.Run("pods the runner does not take", func(t *testing.T) {
		g := NewWithT(t)
		// No mapped image: left to the test.
		other := runnerPod(ns, "other-image", "amd64", "true", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.invalid/other:1" })
		g.Expect(b.Client.Create(ctx, other)).To(Succeed())
		// Some images mapped, some not: failed at once.
		mixed := runnerPod(ns, "mixed", "amd64", "true", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "other", Image: "example.invalid/other:1"})
		})
		g.Expect(b.Client.Create(ctx, mixed)).To(Succeed())
		done := waitPod(t, b, mixed, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(done.Status.Reason).To(Equal("UnmappedImage"))
		g.Expect(done.Status.Message).To(ContainSubstring("example.invalid/other:1"))
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		g.Expect(other.Spec.NodeName).NotTo(BeEmpty())
		g.Expect(other.Status.Phase).To(Equal(corev1.PodPending))
	})

	t.Run("a restarted runner runs no pod twice", func(t *testing.T) {
		g := NewWithT(t)
		script := `echo run >>/var/run/archway-bed/shared/count; echo started; sleep 602.5`
		pod := runnerPod(ns, "restart", "arm64", script, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/var/run/archway-bed/shared"}}
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		waitPod(t, b, pod, podRunning)
		g.Eventually(func() []int { return processesWith("sleep\x00602.5\x00") }).WithTimeout(runnerTimeout).Should(HaveLen(1))
		finished := &corev1.Pod{}
		g.Expect(b.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "init"}, finished)).To(Succeed())
		finishedLog, err := b.Runner.ContainerLog(finished, "init-1")
		g.Expect(err).NotTo(HaveOccurred())

		old := b.Runner
		old.Stop()
		g.Expect(processesWith("sleep\x00602.5\x00")).To(BeEmpty(), "Stop left the pod's process running")
		r, err := b.StartPodRunner(ctx, bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}, Dir: old.Dir})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Runner).To(Equal(r))

		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodFailed))
		g.Expect(done.Status.Reason).To(Equal("RunnerRestarted"))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated).To(HaveField("Reason", "ContainerStatusUnknown"))
		g.Consistently(func() []int { return processesWith("sleep\x00602.5\x00") }).WithTimeout(2 * time.Second).Should(BeEmpty())
		count, err := os.ReadFile(filepath.Join(shared, "count"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(count)).To(Equal("run\n"))
		// A finished pod stays as it was, and its logs are still served.
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(finished), finished)).To(Succeed())
		g.Expect(finished.Status.Phase).To(Equal(corev1.PodSucceeded))
		again, err := r.ContainerLog(finished, "init-1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(finishedLog))
		logs, err := kubectl(ctx, b, "logs", "-n", ns, "init", "-c", "main")
		g.Expect(err).NotTo(HaveOccurred(), logs)
		// The new runner runs new pods.
		fresh := runnerPod(ns, "after-restart", "amd64", `printf fresh >/dev/termination-log`)
		g.Expect(b.Client.Create(ctx, fresh)).To(Succeed())
		done = waitPod(t, b, fresh, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded))
		g.Expect(done.Status.ContainerStatuses[0].State.Terminated.Message).To(Equal("fresh"))
	})

	t.Run("the host's mount table never shows the pods' mounts", func(t *testing.T) {
		g := NewWithT(t)
		// Other programs on the machine mount and unmount: look for the
		// pods' sources (under the bed's directory or the shared one) and
		// targets (the mountPaths; /var/run is /run).
		var ours []string
		for line := range mountTable(t) {
			if hostMounts[line] {
				continue
			}
			fields := strings.Fields(line)
			root, target := fields[1], fields[2]
			for _, prefix := range []string{b.Dir, shared, "/var/run/secrets/archway", "/run/secrets/archway",
				"/var/run/archway-bed", "/run/archway-bed", "/var/run/secrets/kubernetes.io", "/run/secrets/kubernetes.io",
				"/dev/termination-log"} {
				if root == prefix || strings.HasPrefix(root, prefix+"/") || target == prefix || strings.HasPrefix(target, prefix+"/") {
					ours = append(ours, line)
				}
			}
		}
		g.Expect(ours).To(BeEmpty())
	})
}

// TestPodRunnerStopsWithTheBed: Bed.Stop kills the processes of running
// pods.
func TestPodRunnerStopsWithTheBed(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Nodes:           bed.ArchNodes(1, "amd64"),
		Runner:          &bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "stop")
	g.Expect(err).NotTo(HaveOccurred())
	pod := runnerPod(ns, "sleeper", "amd64", `sleep 603.75`)
	g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
	waitPod(t, b, pod, podRunning)
	g.Eventually(func() []int { return processesWith("sleep\x00603.75\x00") }).WithTimeout(runnerTimeout).Should(HaveLen(1))
	g.Expect(b.Stop()).To(Succeed())
	g.Expect(processesWith("sleep\x00603.75\x00")).To(BeEmpty())
}

// runnerPod is a pod the runner takes: labelled manual, pinned to arch (when
// set), one container "main" running script with /bin/sh.
func runnerPod(ns, name, arch, script string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{bed.ManualPodLabel: "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: shImage, Command: []string{"sh", "-c", script}}},
		},
	}
	if arch != "" {
		p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: arch}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func podRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// waitPod waits until done holds for the pod and returns it.
func waitPod(t *testing.T, b *bed.Bed, pod *corev1.Pod, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runnerTimeout)
	defer cancel()
	got := &corev1.Pod{}
	if err := bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(pod), got, done); err != nil {
		t.Fatal(err)
	}
	return got
}

// kubectl runs the bed's kubectl against the bed.
func kubectl(ctx context.Context, b *bed.Bed, args ...string) (string, error) {
	bin, err := bed.Tool("kubectl")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, runnerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + b.Kubeconfig}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String() + errOut.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// processesWith lists the processes whose command line is cmdline (NUL
// separated, ending with NUL).
func processesWith(cmdline string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(data) == cmdline {
			// A zombie has an empty command line; this one runs.
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountTable is this process's mount table as a set of lines without the
// mount IDs, which other programs on the machine change.
func mountTable(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	ids := regexp.MustCompile(`^\d+ \d+ `)
	lines := map[string]bool{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if line != "" {
			lines[ids.ReplaceAllString(line, "")] = true
		}
	}
	return lines
}

// TestPodRunnerInClusterConfig runs pods as a cluster would with
// RunnerOptions.InClusterConfig and PodIPs: kubectl inside the pod, with no
// kubeconfig, talks to the apiserver as the pod's service account with a
// token bound to the pod, and may do what its Role grants and nothing
// else; a pod that opts out has no token; each pod has an IP of its own.
func TestPodRunnerInClusterConfig(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	kubectlBin, err := bed.Tool("kubectl")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Nodes:           bed.ArchNodes(1, "amd64"),
		Runner: &bed.RunnerOptions{
			Images: map[string]string{shImage: "/bin/sh"},
			// No kubeconfig of the host's: kubectl falls back to the
			// in-cluster configuration.
			Env:             []string{"KUBECTL=" + kubectlBin, "HOME=" + t.TempDir()},
			InClusterConfig: true,
			PodIPs:          true,
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "incluster")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})).To(Succeed())
	g.Expect(b.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	})).To(Succeed())
	g.Expect(b.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	})).To(Succeed())

	script := `set -e
who=$("$KUBECTL" auth whoami -o 'jsonpath={.status.userInfo.username} {.status.userInfo.extra.authentication\.kubernetes\.io/pod-name[0]}')
"$KUBECTL" get pod "$POD_NAME" -o name >/dev/null
if "$KUBECTL" get secrets 2>/dev/null; then echo "listed secrets" >/dev/termination-log; exit 1; fi
printf '%s|%s|%s' "$who" "$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)" "$POD_IP" >/dev/termination-log`
	pod := runnerPod(ns, "as-reader", "amd64", script, func(p *corev1.Pod) {
		p.Spec.ServiceAccountName = "reader"
		p.Spec.Containers[0].Env = []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_IP", "status.podIP")}
	})
	g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
	done := waitPod(t, b, pod, podEnded)
	msg := done.Status.ContainerStatuses[0].State.Terminated.Message
	g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), "message: %s", msg)
	parts := strings.Split(msg, "|")
	g.Expect(parts).To(HaveLen(3))
	g.Expect(parts[0]).To(Equal("system:serviceaccount:" + ns + ":reader as-reader"))
	g.Expect(parts[1]).To(Equal(ns))
	g.Expect(parts[2]).To(Equal(done.Status.PodIP))
	g.Expect(done.Status.PodIP).To(MatchRegexp(`^198\.18\.\d+\.\d+$`))
	g.Expect(done.Status.HostIP).To(Equal("127.0.0.1"))

	optOut := runnerPod(ns, "no-token", "amd64", `test ! -e /var/run/secrets/kubernetes.io/serviceaccount/token`, func(p *corev1.Pod) {
		p.Spec.AutomountServiceAccountToken = ptr.To(false)
	})
	g.Expect(b.Client.Create(ctx, optOut)).To(Succeed())
	other := waitPod(t, b, optOut, podEnded)
	g.Expect(other.Status.Phase).To(Equal(corev1.PodSucceeded), "a token was mounted: %+v", other.Status)
	g.Expect(other.Status.PodIP).NotTo(Equal(done.Status.PodIP))
}
