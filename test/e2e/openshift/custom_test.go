package openshift_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
)

var platforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}

// customBuild creates an OpenShift Build of the Custom strategy naming
// archway's builder image, as `oc start-build` leaves it for OpenShift's
// controller (phase New), building dockerfile for every platform.
func customBuild(t *testing.T, ctx context.Context, ns, name, dockerfile, output string) *unstructured.Unstructured {
	t.Helper()
	return customBuildFor(t, ctx, ns, name, dockerfile, output, platforms)
}

// customBuildFor is customBuild for the platforms given.
func customBuildFor(t *testing.T, ctx context.Context, ns, name, dockerfile, output string, platforms []string) *unstructured.Unstructured {
	t.Helper()
	return customBuildWithEnv(t, ctx, ns, name, dockerfile, output, platforms)
}

// customBuildWithEnv is customBuildFor with more variables in the custom
// strategy's env.
func customBuildWithEnv(t *testing.T, ctx context.Context, ns, name, dockerfile, output string, platforms []string, env ...map[string]any) *unstructured.Unstructured {
	t.Helper()
	return createBuild(t, ctx, newCustomBuild(ns, name, dockerfile, output, platforms, env...))
}

// createBuild creates the Build b.
func createBuild(t *testing.T, ctx context.Context, b *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := dyn.Resource(buildsResource).Namespace(b.GetNamespace()).Create(ctx, b, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// newCustomBuild is the Build customBuildWithEnv creates.
func newCustomBuild(ns, name, dockerfile, output string, platforms []string, env ...map[string]any) *unstructured.Unstructured {
	strategyEnv := []any{map[string]any{"name": "PLATFORMS", "value": strings.Join(platforms, ",")}}
	for _, e := range env {
		strategyEnv = append(strategyEnv, e)
	}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "build.openshift.io/v1",
		"kind":       "Build",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"source": map[string]any{"type": "Dockerfile", "dockerfile": dockerfile},
			"strategy": map[string]any{"type": "Custom", "customStrategy": map[string]any{
				"from": map[string]any{"kind": "DockerImage", "name": builderImage},
				"env":  strategyEnv,
			}},
			"output": map[string]any{"to": map[string]any{"kind": "DockerImage", "name": output}},
		},
		"status": map[string]any{"phase": "New"},
	}}
	return b
}

// waitFor polls until done says so (or fails), or ctx ends.
func waitFor(ctx context.Context, what string, done func() (bool, error)) error {
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func buildPhase(ctx context.Context, ns, name string) (string, error) {
	return e2e.OpenShiftBuildPhase(ctx, dyn, ns, name)
}

func multiArchBuild(ctx context.Context, ns, name string) (*archwaybuildv1alpha1.MultiArchBuild, error) {
	return e2e.GetMultiArchBuild(ctx, dyn, ns, name)
}

func podLog(ctx context.Context, ns, name string) (string, error) {
	rc, err := theBed.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return string(data), err
}

// TestCustomStrategyBuildsEveryPlatform: a Custom-strategy Build of four
// platforms -> OpenShift's controller (stand-in) makes the custom pod ->
// archway's builder in it builds every platform in a pod of its own, pinned
// to a node of that architecture and unprivileged, and the index is pushed
// -> the pod exits 0 and the Build is Complete; the custom pod's log shows
// every platform's lines, and the MultiArchBuild each platform's status.
func TestCustomStrategyBuildsEveryPlatform(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp")
	if err != nil {
		t.Fatal(err)
	}
	repo := ns + "/hello"
	b := customBuild(t, ctx, ns, "hello-1", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", theBed.Registry.Host+"/"+repo+":v1")
	// The pods as last seen while the build ran: what they were made as
	// and where they ran is judged from these.
	seen := map[string]*corev1.Pod{}
	if err := waitFor(ctx, "the Build to end", func() (bool, error) {
		list, err := theBed.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.NodeName != "" {
				seen[p.Name] = p
			}
		}
		phase, err := buildPhase(ctx, ns, b.GetName())
		return phase == "Complete" || phase == "Failed" || phase == "Error" || phase == "Cancelled", err
	}); err != nil {
		t.Fatal(err)
	}
	log, err := podLog(ctx, ns, "hello-1-build")
	if err != nil {
		t.Fatal(err)
	}
	if phase, _ := buildPhase(ctx, ns, b.GetName()); phase != "Complete" {
		t.Fatalf("Build phase = %s, want Complete; the custom pod's log:\n%s", phase, log)
	}
	custom, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, "hello-1-build", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := custom.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Errorf("custom pod's container status = %+v, want terminated with exit code 0", st)
	}
	for _, p := range platforms {
		if !strings.Contains(log, "["+p+"] ") {
			t.Errorf("the custom pod's log has no line of %s:\n%s", p, log)
		}
		pp, _ := platform.Parse(p)
		name := buildv1.PlatformPodName(b.GetName(), p)
		pod := seen[name]
		if pod == nil {
			t.Errorf("no pod %s of %s was seen bound to a node", name, p)
			continue
		}
		if got := pod.Spec.NodeSelector[corev1.LabelArchStable]; got != pp.Architecture {
			t.Errorf("pod %s: node selector %s=%q, want %q", name, corev1.LabelArchStable, got, pp.Architecture)
		}
		if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
			t.Errorf("pod %s: hostUsers = %v, want false (unprivileged)", name, pod.Spec.HostUsers)
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != b.GetUID() || ref.Kind != "Build" {
			t.Errorf("pod %s: controller = %+v, want the Build %s", name, ref, b.GetUID())
		}
		node, err := theBed.Clientset.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node of pod %s: %v", name, err)
		} else if node.Labels[corev1.LabelArchStable] != pp.Architecture {
			t.Errorf("pod %s ran on node %s of %s", name, node.Name, node.Labels[corev1.LabelArchStable])
		}
	}
	// The platforms came from the strategy's PLATFORMS, and the log says so.
	if !strings.Contains(log, "(platforms from customStrategy.env PLATFORMS)") {
		t.Errorf("the custom pod's log does not say the platforms came from the strategy's PLATFORMS:\n%s", log)
	}
	if !strings.Contains(log, "[manifest-list] ") {
		t.Errorf("the custom pod's log has no line of the manifest-list pod:\n%s", log)
	}
	mab, err := multiArchBuild(ctx, ns, b.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseComplete || len(mab.Status.Platforms) != len(platforms) {
		t.Errorf("MultiArchBuild status: phase %s, %d platforms; want Complete, %d", mab.Status.Phase, len(mab.Status.Platforms), len(platforms))
	}
	for _, e := range mab.Status.Platforms {
		if e.Phase != buildv1.BuildPhaseComplete || e.Output == nil || e.Output.ImageDigest == "" {
			t.Errorf("MultiArchBuild entry %s: phase %s, output %+v; want Complete with a digest", e.Platform, e.Phase, e.Output)
		}
	}
	// kubectl archway describe shows each platform of the MultiArchBuild.
	var out, errOut bytes.Buffer
	describe := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	describe.SetArgs([]string{"describe", "build", b.GetName(), "-n", ns, "--kubeconfig", theBed.Kubeconfig})
	if err := describe.ExecuteContext(ctx); err != nil {
		t.Errorf("kubectl archway describe build: %v\n%s", err, errOut.String())
	}
	for _, p := range platforms {
		if !regexp.MustCompile(regexp.QuoteMeta(p) + `\s+Complete`).MatchString(out.String()) {
			t.Errorf("kubectl archway describe build shows no Complete row of %s:\n%s", p, out.String())
		}
	}
	if refs := mab.OwnerReferences; len(refs) != 1 || refs[0].UID != b.GetUID() {
		t.Errorf("MultiArchBuild owners = %+v, want the Build", refs)
	}
	img, err := theBed.Registry.OpenImage(ctx, theBed.Registry.Host+"/"+repo+":v1")
	if err != nil {
		t.Fatal(err)
	}
	index, _, err := img.Index(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := theBed.Registry.ManifestDigest(ctx, repo, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range index.Manifests {
		if m.Platform != nil {
			got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, platforms) {
		t.Errorf("index %s lists %v, want %v", digest, got, platforms)
	}
	if mab.Status.Output.To == nil || mab.Status.Output.To.ImageDigest != digest {
		t.Errorf("MultiArchBuild output = %+v, want the index %s", mab.Status.Output.To, digest)
	}
	tags, err := theBed.Registry.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tags, []string{"v1"}) {
		t.Errorf("tags of %s = %v, want only v1 (the per-platform tags removed)", repo, tags)
	}
}

// TestCancelStopsEveryPlatform: `oc cancel-build` marks the Build
// cancelled, OpenShift's controller (stand-in) deletes the custom pod, and
// the custom pod, on its SIGTERM, stops every platform's pod and starts the
// pod that removes the per-platform tags.
func TestCancelStopsEveryPlatform(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp")
	if err != nil {
		t.Fatal(err)
	}
	b := customBuild(t, ctx, ns, "slow-1", "FROM "+theBed.BaseImage+"\nRUN sleep 600\n", theBed.Registry.Host+"/"+ns+"/slow:v1")
	if err := waitFor(ctx, "every platform's pod to run its build", func() (bool, error) {
		mab, err := multiArchBuild(ctx, ns, b.GetName())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		running := 0
		for _, e := range mab.Status.Platforms {
			if e.Phase == buildv1.BuildPhaseRunning {
				running++
			}
		}
		return running == len(platforms), nil
	}); err != nil {
		t.Fatal(err)
	}
	customPod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, b.GetName()+"-build", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// oc cancel-build: status.cancelled on the Build.
	cur, err := dyn.Resource(buildsResource).Namespace(ns).Get(ctx, b.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cur.Object, true, "status", "cancelled"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(buildsResource).Namespace(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mab *archwaybuildv1alpha1.MultiArchBuild
	if err := waitFor(ctx, "the MultiArchBuild to end", func() (bool, error) {
		mab, err = multiArchBuild(ctx, ns, b.GetName())
		return err == nil && mab.Status.Phase.IsTerminal(), err
	}); err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseCancelled {
		t.Errorf("MultiArchBuild phase = %s, want Cancelled", mab.Status.Phase)
	}
	for _, e := range mab.Status.Platforms {
		if e.Phase != buildv1.BuildPhaseCancelled {
			t.Errorf("MultiArchBuild entry %s: phase %s, want Cancelled", e.Platform, e.Phase)
		}
	}
	if phase, err := buildPhase(ctx, ns, b.GetName()); err != nil || phase != "Cancelled" {
		t.Errorf("Build phase = %q (%v), want Cancelled", phase, err)
	}
	if err := waitFor(ctx, "every platform's pod to end", func() (bool, error) {
		for _, p := range platforms {
			pod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, buildv1.PlatformPodName(b.GetName(), p), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err
			}
			if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	removal, stop := context.WithTimeout(ctx, bed.LongTimeout)
	defer stop()
	if err := waitFor(removal, "the pod that removes the per-platform tags to succeed", func() (bool, error) {
		pod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, buildv1.ManifestListPodName(b.GetName()), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		removes := slices.Contains(pod.Spec.Containers[0].Command, "--remove-tags")
		if removes && pod.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed", pod.Name)
		}
		return removes && pod.Status.Phase == corev1.PodSucceeded, nil
	}); err != nil {
		log, _ := runner.ContainerLog(customPod, "custom-build")
		t.Fatalf("%v; the custom pod's log:\n%s", err, log)
	}
}
