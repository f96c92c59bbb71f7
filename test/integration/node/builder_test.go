package node

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/test/bed"
)

// builderPod is the pod build-controller makes for a one-platform Docker
// build of this machine's platform with an inline Dockerfile, bound to the
// real node, its builder writing no status (the Build object need not
// exist) and reaching the bed's plain-HTTP registry.
func builderPod(t *testing.T, ns, name, dockerfile string, runtimeClass *string) *corev1.Pod {
	t.Helper()
	cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: builderImage}}
	configv1alpha1.SetDefaults(cfg)
	b := &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			ServiceAccount: "default",
			Source:         buildv1.BuildSource{Dockerfile: ptr.To(dockerfile)},
			Strategy:       buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}},
			Output:         buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: testBed.Registry.Host + "/node/" + name + ":v1"}},
		}},
	}
	pod, err := controller.PodPlan{Config: &cfg.Build}.BuildPod(b, "")
	if err != nil {
		t.Fatal(err)
	}
	pod.OwnerReferences = nil
	pod.Spec.NodeName = testBed.Node.Name
	pod.Spec.RuntimeClassName = runtimeClass
	c := &pod.Spec.Containers[0]
	c.Command = append(c.Command, "--no-report", "--insecure-registry="+testBed.Registry.Host)
	return pod
}

// TestBuildPodOnARealRuntime runs a build pod as build-controller makes it
// (hostUsers: false, seccomp RuntimeDefault, only the build capabilities,
// a read-only root) under containerd and runc: buildah builds a RUN step in
// the pod's user namespace and pushes the image.
func TestBuildPodOnARealRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := createNamespace(ctx, t)
	pod := builderPod(t, ns, "sandboxed", "FROM "+testBed.BaseImage+"\nRUN cat /proc/self/uid_map > /uid_map && echo built > /built\n", nil)
	if err := testBed.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	done := waitPodDone(ctx, t, ns, pod.Name)
	logs := podLogs(ctx, t, ns, pod.Name, controller.BuildContainerName)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("build pod %s: %+v\n%s", done.Status.Phase, done.Status.ContainerStatuses, logs)
	}
	digest, err := testBed.Registry.ManifestDigest(ctx, "node/sandboxed", "v1")
	if err != nil {
		t.Fatalf("the build pod pushed nothing: %v\n%s", err, logs)
	}
	t.Logf("pushed %s; log:\n%s", digest, logs)
}

// TestBuilderRefusesTheHostUserNamespace runs the same build pod under a
// runtime handler that drops the pod's user namespace (runc-nouserns, as
// containerd 1.6 ignores hostUsers: false): the builder finds the identity
// uid map and fails before fetching anything, with reason
// UserNamespaceIgnored in the pod's termination message.
func TestBuilderRefusesTheHostUserNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := createNamespace(ctx, t)
	pod := builderPod(t, ns, "unsandboxed", "FROM "+testBed.BaseImage+"\nRUN echo built > /built\n", ptr.To(bed.NoUserNamespaceRuntimeClass))
	if err := testBed.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	done := waitPodDone(ctx, t, ns, pod.Name)
	if done.Status.Phase != corev1.PodFailed || len(done.Status.ContainerStatuses) == 0 || done.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("build pod %s: %+v", done.Status.Phase, done.Status.ContainerStatuses)
	}
	term := done.Status.ContainerStatuses[0].State.Terminated
	if !strings.Contains(term.Message, string(buildv1.StatusReasonUserNamespaceIgnored)) || !strings.Contains(term.Message, "hostUsers: false") {
		t.Fatalf("termination message %q, want reason %s and why", term.Message, buildv1.StatusReasonUserNamespaceIgnored)
	}
	if _, err := testBed.Registry.ManifestDigest(ctx, "node/unsandboxed", "v1"); err == nil {
		t.Fatal("the refused build pushed an image")
	}
}

// TestBuildPodUnderPodSecurityBaseline creates, in a namespace enforcing
// Pod Security baseline, the build pod as build-controller does (as its
// service account, which the shipped admission configuration exempts: the
// pod's SYS_ADMIN, in its user namespace, is the one check it fails) and
// the real runtime runs it to a pushed image; the same pod from anyone
// else, and a privileged pod, are refused.
func TestBuildPodUnderPodSecurityBaseline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := createNamespace(ctx, t)
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	if _, err := testBed.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(testBed.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	pod := builderPod(t, ns, "baseline", "FROM "+testBed.BaseImage+"\nRUN echo built > /built\n", nil)
	if _, err := as("alice").CoreV1().Pods(ns).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), `violates PodSecurity "baseline`) {
		t.Fatalf("alice's build pod in a baseline namespace: %v, want a PodSecurity refusal", err)
	}
	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "privileged"},
		Spec: corev1.PodSpec{
			NodeName: testBed.Node.Name,
			Containers: []corev1.Container{{Name: "c", Image: testBed.BaseImage,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
		},
	}
	if _, err := as("alice").CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "privileged") {
		t.Fatalf("a tenant's privileged pod: %v, want a PodSecurity refusal", err)
	}
	if _, err := as(buildControllerUser).CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("build-controller's build pod in a baseline namespace: %v", err)
	}
	done := waitPodDone(ctx, t, ns, pod.Name)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("build pod %s: %+v\n%s", done.Status.Phase, done.Status.ContainerStatuses, podLogs(ctx, t, ns, pod.Name, controller.BuildContainerName))
	}
	if _, err := testBed.Registry.ManifestDigest(ctx, "node/baseline", "v1"); err != nil {
		t.Fatalf("the build pod pushed nothing: %v", err)
	}
}

// buildControllerUser is build-controller's identity in a cluster, which
// manifests/podsecurity exempts from Pod Security.
const buildControllerUser = "system:serviceaccount:archway-system:build-controller"
