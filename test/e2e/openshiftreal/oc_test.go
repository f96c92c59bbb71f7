package openshiftreal_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
	"github.com/archway-build/archway/test/framework"
)

var (
	platforms      = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	buildsResource = e2e.OpenShiftBuilds
)

// oc runs the real oc as the bed's admin, with stdin, and returns its
// standard output.
func oc(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, ocBinary, append([]string{"--kubeconfig", theBed.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("oc %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// newProject makes a namespace as OpenShift's project and service-account
// controllers leave it: a builder account whose docker secret OpenShift's
// build controller hands to build pods.
func newProject(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns, err := theBed.CreateNamespace(ctx, "oc")
	if err != nil {
		t.Fatal(err)
	}
	kube := theBed.Clientset
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder-dockercfg"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: ns, Name: "builder"},
		Secrets:          []corev1.ObjectReference{{Name: secret.Name}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: secret.Name}},
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// buildConfig is a BuildConfig of the Custom strategy naming archway's
// builder image, as an OpenShift user writes one for archway: its
// platforms default to this machine's, and start-build's -e overrides
// them.
func buildConfig(name, dockerfile, output string) string {
	return fmt.Sprintf(`apiVersion: build.openshift.io/v1
kind: BuildConfig
metadata:
  name: %s
spec:
  source:
    dockerfile: %q
  strategy:
    customStrategy:
      from:
        kind: DockerImage
        name: %s
      env:
      - name: PLATFORMS
        value: linux/amd64
  output:
    to:
      kind: DockerImage
      name: %s
`, name, dockerfile, builderImage, output)
}

// startBuild creates the BuildConfig and starts a Build of it for every
// platform with `oc start-build -e`, and returns the Build's name.
func startBuild(t *testing.T, ctx context.Context, ns, name, dockerfile, output string) string {
	t.Helper()
	if _, err := oc(ctx, buildConfig(name, dockerfile, output), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out, err := oc(ctx, "", "start-build", name, "-n", ns, "-e", "PLATFORMS="+strings.Join(platforms, ","), "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	build := strings.TrimPrefix(strings.TrimSpace(out), "build.build.openshift.io/")
	if build != name+"-1" {
		t.Fatalf("oc start-build printed %q, want build.build.openshift.io/%s-1", out, name)
	}
	return build
}

func buildPhase(ctx context.Context, ns, name string) (string, error) {
	return e2e.OpenShiftBuildPhase(ctx, dyn, ns, name)
}

func multiArchBuild(ctx context.Context, ns, name string) (*archwaybuildv1alpha1.MultiArchBuild, error) {
	return e2e.GetMultiArchBuild(ctx, dyn, ns, name)
}

// waitPhase waits until the Build leaves the phases given.
func waitPhase(ctx context.Context, ns, name string, leave ...string) (string, error) {
	var phase string
	err := framework.Poll(ctx, bed.BuildTimeout, func(ctx context.Context) (bool, error) {
		var err error
		phase, err = buildPhase(ctx, ns, name)
		return err == nil && !slices.Contains(leave, phase), err
	})
	return phase, err
}

// TestOcBuildsEveryPlatform: `oc start-build -e PLATFORMS=...` of a
// Custom-strategy BuildConfig naming archway's builder ->
// openshift-apiserver instantiates the Build -> OpenShift's build
// controller makes the custom pod -> archway builds every platform in a pod
// of its own and pushes the index -> OpenShift's controller moves the Build
// to Complete; `oc logs -f build/x` shows every platform's lines.
func TestOcBuildsEveryPlatform(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	repo := ns + "/hello"
	b := startBuild(t, ctx, ns, "hello", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", theBed.Registry.Host+"/"+repo+":v1")
	// oc logs -f waits for the custom pod and follows it to its end.
	if _, err := waitPhase(ctx, ns, b, "New", "Pending"); err != nil {
		t.Fatal(err)
	}
	log, err := oc(ctx, "", "logs", "-f", "build/"+b, "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	phase, err := waitPhase(ctx, ns, b, "New", "Pending", "Running")
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Complete" {
		t.Fatalf("Build phase = %s, want Complete; oc logs:\n%s", phase, log)
	}
	t.Logf("oc logs -f build/%s:\n%s", b, log)
	if !strings.Contains(log, "(platforms from customStrategy.env PLATFORMS)") {
		t.Errorf("oc logs build/%s does not say the platforms came from start-build's -e PLATFORMS", b)
	}
	for _, p := range append(slices.Clone(platforms), "manifest-list") {
		if !strings.Contains(log, "["+p+"] ") {
			t.Errorf("oc logs build/%s has no line of %s:\n%s", b, p, log)
		}
	}
	mab, err := multiArchBuild(ctx, ns, b)
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseComplete || len(mab.Status.Platforms) != len(platforms) {
		t.Errorf("MultiArchBuild status: phase %s, %d platforms; want Complete, %d", mab.Status.Phase, len(mab.Status.Platforms), len(platforms))
	}
	got, err := theBed.Registry.IndexPlatforms(ctx, theBed.Registry.Host+"/"+repo+":v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, platforms) {
		t.Errorf("the index lists %v, want %v", got, platforms)
	}
	// The pod is OpenShift's: its CustomBuildStrategy's privileged
	// custom-build container.
	pod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, b+"-build", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := pod.Spec.Containers[0]; c.Name != "custom-build" || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("custom pod container = %s %+v, want OpenShift's privileged custom-build", c.Name, c.SecurityContext)
	}
	u, err := dyn.Resource(buildsResource).Namespace(ns).Get(ctx, b, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedString(u.Object, "status", "completionTimestamp"); d == "" {
		t.Errorf("the Build has no completionTimestamp: %v", u.Object["status"])
	}
}

// TestOcCancelBuild: `oc cancel-build` of a running Build -> OpenShift's
// controller deletes the custom pod -> the custom pod stops every
// platform's pod and starts the pod that removes the per-platform tags,
// and the Build is Cancelled.
func TestOcCancelBuild(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	b := startBuild(t, ctx, ns, "slow", "FROM "+theBed.BaseImage+"\nRUN sleep 600\n", theBed.Registry.Host+"/"+ns+"/slow:v1")
	if err := framework.Poll(ctx, bed.BuildTimeout, func(ctx context.Context) (bool, error) {
		mab, err := multiArchBuild(ctx, ns, b)
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
		t.Fatalf("waiting for every platform's pod to run: %v", err)
	}
	start := time.Now()
	out, err := oc(ctx, "", "cancel-build", b, "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("oc cancel-build took %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	phase, err := waitPhase(ctx, ns, b, "New", "Pending", "Running")
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Cancelled" {
		t.Errorf("Build phase = %s, want Cancelled", phase)
	}
	if err := framework.Poll(ctx, bed.LongTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range platforms {
			pod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, buildv1.PlatformPodName(b, p), metav1.GetOptions{})
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
		t.Fatalf("waiting for every platform's pod to end: %v", err)
	}
	if err := framework.Poll(ctx, bed.LongTimeout, func(ctx context.Context) (bool, error) {
		pod, err := theBed.Clientset.CoreV1().Pods(ns).Get(ctx, buildv1.ManifestListPodName(b), metav1.GetOptions{})
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
		t.Fatalf("waiting for the pod that removes the per-platform tags: %v", err)
	}
	mab, err := multiArchBuild(ctx, ns, b)
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseCancelled {
		t.Errorf("MultiArchBuild phase = %s, want Cancelled", mab.Status.Phase)
	}
}

// TestGenericWebhookStartsBuild: a delivery to a BuildConfig's generic
// webhook, which openshift-apiserver serves at
// /apis/build.openshift.io/v1/namespaces/NS/buildconfigs/NAME/webhooks/SECRET/generic,
// instantiates a Build, which OpenShift's controller hands to archway's
// builder like any other: it completes for the BuildConfig's platforms.
// A delivery with a wrong secret starts nothing.
func TestGenericWebhookStartsBuild(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	bc := buildConfig("hooked", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", theBed.Registry.Host+"/"+ns+"/hooked:v1") +
		"  triggers:\n  - type: Generic\n    generic:\n      secret: s3cr3t-value\n"
	if _, err := oc(ctx, bc, "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(theBed.Config)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(secret string) int {
		url := strings.TrimSuffix(theBed.Config.Host, "/") + "/apis/build.openshift.io/v1/namespaces/" + ns + "/buildconfigs/hooked/webhooks/" + secret + "/generic"
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := deliver("wrong-secret"); code < 400 {
		t.Errorf("a delivery with a wrong secret got %d, want a refusal", code)
	}
	if code := deliver("s3cr3t-value"); code != http.StatusOK {
		t.Fatalf("the delivery got %d, want 200", code)
	}
	phase, err := waitPhase(ctx, ns, "hooked-1", "", "New", "Pending", "Running")
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Complete" {
		t.Fatalf("Build hooked-1 phase = %s, want Complete", phase)
	}
	if _, err := buildPhase(ctx, ns, "hooked-2"); !apierrors.IsNotFound(err) {
		t.Errorf("Build hooked-2: %v, want none (the wrong secret started nothing)", err)
	}
	mab, err := multiArchBuild(ctx, ns, "hooked-1")
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseComplete || len(mab.Status.Platforms) != 1 || mab.Status.Platforms[0].Platform != "linux/amd64" {
		t.Errorf("MultiArchBuild status: phase %s, platforms %+v; want Complete, linux/amd64 (the BuildConfig's)", mab.Status.Phase, mab.Status.Platforms)
	}
}

// TestImageStreamTagOutput: a BuildConfig whose output is an
// ImageStreamTag: OpenShift's controller resolves it to the image
// stream's repository in the internal registry (the bed's) and hands it
// to the custom pod, which pushes the index there; the Build records it.
func TestImageStreamTagOutput(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	if _, err := oc(ctx, "", "create", "imagestream", "streamed", "-n", ns); err != nil {
		t.Fatal(err)
	}
	bc := strings.Replace(buildConfig("streamed", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", "unused"),
		"      kind: DockerImage\n      name: unused\n", "      kind: ImageStreamTag\n      name: streamed:v1\n", 1)
	if !strings.Contains(bc, "ImageStreamTag") {
		t.Fatalf("the BuildConfig names no ImageStreamTag:\n%s", bc)
	}
	if _, err := oc(ctx, bc, "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	two := []string{"linux/amd64", "linux/arm64"}
	if _, err := oc(ctx, "", "start-build", "streamed", "-n", ns, "-e", "PLATFORMS="+strings.Join(two, ",")); err != nil {
		t.Fatal(err)
	}
	phase, err := waitPhase(ctx, ns, "streamed-1", "", "New", "Pending", "Running")
	if err != nil {
		t.Fatal(err)
	}
	want := theBed.Registry.Host + "/" + ns + "/streamed:v1"
	u, err := dyn.Resource(buildsResource).Namespace(ns).Get(ctx, "streamed-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase != "Complete" {
		t.Fatalf("Build phase = %s, want Complete: %v", phase, u.Object["status"])
	}
	if got, _, _ := unstructured.NestedString(u.Object, "status", "outputDockerImageReference"); got != want {
		t.Errorf("status.outputDockerImageReference = %q, want %q", got, want)
	}
	got, err := theBed.Registry.IndexPlatforms(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, two) {
		t.Errorf("the index at %s lists %v, want %v", want, got, two)
	}
}

// TestImageChangeTrigger: a BuildConfig with an ImageChange trigger on an
// ImageStreamTag: each new image `oc import-image` brings into the tag
// makes OpenShift's image trigger controller instantiate the BuildConfig,
// with the image in triggeredBy, and archway builds it.
func TestImageChangeTrigger(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	out := theBed.Registry.Host + "/" + ns + "/triggered:v1"
	bc := buildConfig("triggered", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", out) +
		"  triggers:\n  - type: ImageChange\n    imageChange:\n      from:\n        kind: ImageStreamTag\n        name: base:latest\n"
	if _, err := oc(ctx, bc, "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	// importImage points base:latest at ref, imports it (the bed's
	// registry serves plain HTTP) and returns its digest.
	importImage := func(ref string) string {
		t.Helper()
		if _, err := oc(ctx, "", "tag", "--source=docker", "--insecure", ref, "base:latest", "-n", ns); err != nil {
			t.Fatal(err)
		}
		if _, err := oc(ctx, "", "import-image", "base:latest", "--insecure", "--confirm", "-n", ns); err != nil {
			t.Fatal(err)
		}
		digest, err := oc(ctx, "", "get", "istag", "base:latest", "-n", ns, "-o", "jsonpath={.image.metadata.name}")
		if err != nil {
			t.Fatal(err)
		}
		return digest
	}
	// triggeredBy waits for Build name to end Complete and returns the image
	// its trigger names.
	triggeredBy := func(name string) string {
		t.Helper()
		phase, err := waitPhase(ctx, ns, name, "", "New", "Pending", "Running")
		if err != nil {
			t.Fatalf("waiting for Build %s: %v", name, err)
		}
		if phase != "Complete" {
			t.Fatalf("Build %s phase = %s, want Complete", name, phase)
		}
		id, err := oc(ctx, "", "get", "build", name, "-n", ns, "-o", "jsonpath={.spec.triggeredBy[0].imageChangeBuild.imageID}")
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := importImage(theBed.BaseImage)
	if id := triggeredBy("triggered-1"); !strings.HasSuffix(id, first) {
		t.Errorf("Build triggered-1 was triggered by %q, want the image %s", id, first)
	}
	// The image archway just pushed is a new image for the tag.
	second := importImage(out)
	if second == first {
		t.Fatalf("the second import kept the image %s", first)
	}
	if id := triggeredBy("triggered-2"); !strings.HasSuffix(id, second) {
		t.Errorf("Build triggered-2 was triggered by %q, want the image %s", id, second)
	}
}
