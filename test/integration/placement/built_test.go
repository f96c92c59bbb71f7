package placement

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// TestBuiltImagesFromBuildStatus: a pod whose image a completed Build of
// its namespace pushed (by digest, or a tag naming that digest) gets the
// architectures the Build's status records, not the registry's. The Build
// here claims two of the image's four architectures, so the pods say where
// the answer came from. A pod of a namespace without Builds running the
// same digest gets the registry's four, though the Build above and a
// forged one in a third namespace claim that digest: a Build's status,
// which whoever may write builds/status in its namespace could forge,
// never steers the pods of another namespace.
func TestBuiltImagesFromBuildStatus(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "built", nil)
	other := newHarness(t, "built-other", nil)
	attacker := newHarness(t, "built-attacker", nil)
	repo, tag, _ := strings.Cut(strings.TrimPrefix(imgAll, testBed.Registry.Host+"/"), ":")
	d, err := testBed.Registry.ManifestDigest(h.ctx, repo, tag)
	if err != nil {
		t.Fatal(err)
	}
	byDigest := testBed.Registry.Host + "/" + repo + "@" + d

	// Claims arm64 and s390x for the image; a Build still running and
	// one that failed claim ppc64le, and are not believed.
	completeBuild(h.ctx, t, h.ns, "app-1", imgAll, d, buildv1.BuildPhaseComplete, "linux/arm64", "linux/s390x")
	completeBuild(h.ctx, t, h.ns, "app-2", imgAll, d, buildv1.BuildPhaseFailed, "linux/ppc64le")
	// A tenant's forgery in a namespace of its own, claiming ppc64le alone.
	completeBuild(h.ctx, t, attacker.ns, "forged-1", imgAll, d, buildv1.BuildPhaseComplete, "linux/ppc64le")

	h.create(makePod(h.ns, "by-digest").image(byDigest).withGate().obj())
	h.create(makePod(h.ns, "by-tag").image(imgAll).withGate().obj())
	h.create(makePod(other.ns, "elsewhere").image(byDigest).withGate().obj())
	for _, name := range []string{"by-digest", "by-tag"} {
		if got := requiredArchs(h.waitReleased(name)); !got.Equal(sets.New("arm64", "s390x")) {
			t.Errorf("pod %s: required architectures %v, want the Build's [arm64 s390x]", name, sets.List(got))
		}
	}
	if got := requiredArchs(other.waitReleased("elsewhere")); !got.Equal(sets.New("amd64", "arm64", "ppc64le", "s390x")) {
		t.Errorf("a pod of a namespace without Builds: required architectures %v, want the registry's four (not a Build of another namespace)", sets.List(got))
	}
}

// completeBuild creates a Build of ns that pushed digest d to output with
// the given phase and completed platforms, its status written as its pods
// and build-controller would (or a tenant who may write builds/status).
func completeBuild(ctx context.Context, t *testing.T, ns, name, output, d string, phase buildv1.BuildPhase, platforms ...string) {
	t.Helper()
	b := &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Strategy:  buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType},
			Output:    buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: output}},
			Platforms: platforms,
		}},
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = phase
	b.Status.Output.To = &buildv1.BuildStatusOutputTo{ImageDigest: d}
	for _, p := range platforms {
		os, arch, _ := strings.Cut(p, "/")
		b.Status.Platforms = append(b.Status.Platforms, buildv1.BuildStatusPlatform{
			Platform: p, Phase: buildv1.BuildPhaseComplete,
			Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: d, OS: os, Architecture: arch},
		})
	}
	if err := k8s.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// requiredArchs are the architectures the pod's required node affinity
// allows (its terms' kubernetes.io/arch In values).
func requiredArchs(pod *corev1.Pod) sets.Set[string] {
	out := sets.New[string]()
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return out
	}
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelArchStable && e.Operator == corev1.NodeSelectorOpIn {
				out.Insert(e.Values...)
			}
		}
	}
	return out
}
