package api

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
)

// controllerUser is build-controller's identity in a cluster (its service
// account in archway-system), which manifests/podsecurity exempts.
const controllerUser = "system:serviceaccount:archway-system:build-controller"

// TestBuildPodsUnderPodSecurity creates archway's pods in namespaces
// enforcing Pod Security levels, on the real apiserver's PodSecurity
// admission: the manifest-list pod passes restricted; the default
// (unprivileged) build pod fails baseline on exactly one check, the
// capability SYS_ADMIN, and passes without it; the privileged opt-in fails
// on privileged too; build-controller's own requests are exempt (the
// shipped admission configuration), anyone else's are not; a namespace
// without the label admits everything.
func TestBuildPodsUnderPodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	namespace := func(level string) string {
		ns := newNamespace(t)
		if level != "" {
			patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"` + level + `","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
			_, err := b.Clientset.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}
		return ns
	}
	pods := func(ns string, mode configv1alpha1.PodSecurity) (buildPod, manifestList *corev1.Pod) {
		cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: "registry.example.com/archway/builder:v1", PodSecurity: mode}}
		configv1alpha1.SetDefaults(cfg)
		bld := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-1", UID: "app-1-uid"}}
		bld.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
		bld.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}
		pl := controller.PodPlan{Config: &cfg.Build, Platforms: []string{"linux/amd64", "linux/arm64"}}
		bp, err := pl.BuildPod(bld, "linux/arm64")
		g.Expect(err).NotTo(HaveOccurred())
		ml, err := pl.ManifestListPod(bld)
		g.Expect(err).NotTo(HaveOccurred())
		return bp, ml
	}
	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(b.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
		cs, err := kubernetes.NewForConfig(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		return cs
	}
	create := func(cs kubernetes.Interface, pod *corev1.Pod) error {
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	user := as("alice")

	restricted := namespace("restricted")
	_, ml := pods(restricted, "")
	g.Expect(create(user, ml)).To(Succeed(), "the manifest-list pod passes restricted")

	baseline := namespace("baseline")
	bp, ml := pods(baseline, "")
	g.Expect(create(user, ml)).To(Succeed())
	err := create(user, bp)
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`violates PodSecurity "baseline:latest"`),
		ContainSubstring(`non-default capabilities (container "docker-build" must not include "SYS_ADMIN" in securityContext.capabilities.add)`))))
	g.Expect(err.Error()).NotTo(ContainSubstring("),"), "one check fails, no other: %v", err)
	noSysAdmin := bp.DeepCopy()
	c := &noSysAdmin.Spec.Containers[0]
	c.SecurityContext.Capabilities.Add = c.SecurityContext.Capabilities.Add[:len(c.SecurityContext.Capabilities.Add)-1]
	g.Expect(c.SecurityContext.Capabilities.Add).NotTo(ContainElement(corev1.Capability("SYS_ADMIN")))
	g.Expect(create(user, noSysAdmin)).To(Succeed(), "everything else of the build pod passes baseline")
	g.Expect(create(as(controllerUser), bp)).To(Succeed(), "build-controller's requests are exempt")

	privileged, _ := pods(baseline, configv1alpha1.PodSecurityPrivileged)
	g.Expect(create(user, privileged)).To(MatchError(ContainSubstring(`privileged (container "docker-build" must not set securityContext.privileged=true)`)))

	open := namespace("")
	bp, _ = pods(open, "")
	g.Expect(create(user, bp)).To(Succeed(), "without the label, nothing is enforced")
}
