package bed_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/archway-build/archway/test/bed"
)

// TestPodRunnerUserNamespace runs a pod with hostUsers: false as a kubelet
// would: its root is uid 0 of a user namespace mapped to an unprivileged
// host range, so it owns the files it writes to its emptyDir as that host
// uid and cannot read what only the host's root may read; the same pod with
// hostUsers left unset can. A privileged container with hostUsers: false
// is refused.
func TestPodRunnerUserNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Runner:          &bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "userns")
	g.Expect(err).NotTo(HaveOccurred())

	// Readable by the host's root only.
	secretDir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(secretDir, "key"), []byte("host-only"), 0o600)).To(Succeed())
	script := `set -e
read -r inside outside size </proc/self/uid_map
echo "$inside $outside $size" >/scratch/uidmap
id -u >/scratch/uid
echo hello >/scratch/written
if cat ` + filepath.Join(secretDir, "key") + ` >/dev/null 2>&1; then echo yes >/scratch/read-host-file; else echo no >/scratch/read-host-file; fi
`
	run := func(name string, hostUsers *bool) (map[string]string, os.FileInfo) {
		pod := runnerPod(ns, name, "amd64", script, func(p *corev1.Pod) {
			p.Spec.HostUsers = hostUsers
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			p.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), "status: %+v", done.Status)
		dir := filepath.Join(b.Runner.PodDir(done), "volumes", "scratch")
		out := map[string]string{}
		for _, f := range []string{"uidmap", "uid", "read-host-file"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			g.Expect(err).NotTo(HaveOccurred())
			out[f] = strings.TrimSpace(string(data))
		}
		st, err := os.Stat(filepath.Join(dir, "written"))
		g.Expect(err).NotTo(HaveOccurred())
		return out, st
	}

	got, st := run("in-userns", ptr.To(false))
	g.Expect(got["uid"]).To(Equal("0"), "root inside")
	fields := strings.Fields(got["uidmap"])
	g.Expect(fields).To(HaveLen(3))
	g.Expect(fields[0]).To(Equal("0"))
	g.Expect(fields[2]).To(Equal("65536"))
	hostUID, err := strconv.Atoi(fields[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hostUID).To(BeNumerically(">=", 65536), "uid 0 inside is an unprivileged host uid")
	g.Expect(st.Sys().(*syscall.Stat_t).Uid).To(BeEquivalentTo(hostUID), "files the pod writes belong to its host uid")
	g.Expect(got["read-host-file"]).To(Equal("no"), "the pod's root cannot read a file only the host's root may read")

	got, st = run("host-users", nil)
	g.Expect(got["uidmap"]).To(Equal("0 0 4294967295"), "hostUsers unset: the host's user namespace")
	g.Expect(st.Sys().(*syscall.Stat_t).Uid).To(BeEquivalentTo(0))
	g.Expect(got["read-host-file"]).To(Equal("yes"))
}

// TestPodRunnerReadOnlyRoot gives a container with readOnlyRootFilesystem
// a read-only view of everything but its volumes; without it, the same
// write lands.
func TestPodRunnerReadOnlyRoot(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Runner:          &bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "rofs")
	g.Expect(err).NotTo(HaveOccurred())
	outside := t.TempDir()
	g.Expect(os.Chmod(outside, 0o777)).To(Succeed())
	g.Expect(bed.SearchableByOthers(outside)).To(Succeed())

	run := func(name string, readOnly *bool) corev1.PodPhase {
		script := `echo x >/scratch/in-volume || exit 3; echo x >` + filepath.Join(outside, name) + ` || exit 4`
		pod := runnerPod(ns, name, "amd64", script, func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			c := &p.Spec.Containers[0]
			c.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: readOnly}
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		done := waitPod(t, b, pod, podEnded)
		if done.Status.Phase == corev1.PodFailed {
			cs := done.Status.ContainerStatuses[0].State.Terminated
			g.Expect(cs.ExitCode).To(BeEquivalentTo(4), "only the write outside the volume fails: %s", cs.Message)
			g.Expect(cs.Message).To(ContainSubstring("Read-only file system"))
		}
		return done.Status.Phase
	}
	g.Expect(run("read-only", ptr.To(true))).To(Equal(corev1.PodFailed))
	g.Expect(filepath.Join(outside, "read-only")).NotTo(BeAnExistingFile())
	g.Expect(run("writable", nil)).To(Equal(corev1.PodSucceeded))
	g.Expect(filepath.Join(outside, "writable")).To(BeAnExistingFile())
}

// TestPodRunnerCapabilities gives a container in a user namespace the
// capabilities a runtime would: without SYS_ADMIN it cannot unshare a mount
// namespace (what buildah's chroot isolation does for each RUN step), with
// it, it can.
func TestPodRunnerCapabilities(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	b, err := bed.Start(ctx, bed.Options{
		WithoutRegistry: true,
		Runner:          &bed.RunnerOptions{Images: map[string]string{shImage: "/bin/sh"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	ns, err := b.CreateNamespace(ctx, "caps")
	g.Expect(err).NotTo(HaveOccurred())

	run := func(name string, add ...corev1.Capability) *corev1.Pod {
		pod := runnerPod(ns, name, "amd64", `unshare --mount --uts true`, func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			c := &p.Spec.Containers[0]
			c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: add}}
			c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		})
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		return waitPod(t, b, pod, podEnded)
	}
	without := run("without-sys-admin", "SYS_CHROOT")
	g.Expect(without.Status.Phase).To(Equal(corev1.PodFailed))
	g.Expect(without.Status.ContainerStatuses[0].State.Terminated.Message).To(ContainSubstring("Operation not permitted"))
	with := run("with-sys-admin", "SYS_CHROOT", "SYS_ADMIN")
	g.Expect(with.Status.Phase).To(Equal(corev1.PodSucceeded), "%+v", with.Status.ContainerStatuses)
}
