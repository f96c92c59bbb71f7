package openshift_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// TestCustomBuildsCheckTheBasePlatforms: as build-controller does before
// the fan-out, the custom builder reads the platforms of the Dockerfile's
// base image; a platform the base lacks fails the Build with
// BaseImagePlatformNotFound, naming it and the platforms the base has,
// before any platform's pod is made.
func TestCustomBuildsCheckTheBasePlatforms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp-preflight")
	if err != nil {
		t.Fatal(err)
	}
	base := theBed.Registry.Host + "/" + ns + "/amd64-only:1"
	if _, err := theBed.PushBasePlatform(ctx, theBed.Registry, base, "linux/amd64"); err != nil {
		t.Fatal(err)
	}
	b := customBuildFor(t, ctx, ns, "preflight-1", "FROM "+base+"\nENV X=1\n", theBed.Registry.Host+"/"+ns+"/app:v1",
		[]string{"linux/amd64", "linux/s390x"})
	if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Failed" {
		t.Fatalf("Build phase = %s, want Failed (its base has no linux/s390x)", phase)
	}
	mab, err := multiArchBuild(ctx, ns, b.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Reason != buildv1.StatusReasonBaseImagePlatformNotFound || !strings.Contains(mab.Status.Message, "has no linux/s390x (it has linux/amd64)") {
		t.Errorf("status = %s: %s, want %s naming linux/s390x and linux/amd64", mab.Status.Reason, mab.Status.Message, buildv1.StatusReasonBaseImagePlatformNotFound)
	}
	log, _ := podLog(ctx, ns, b.GetName()+"-build")
	if !strings.Contains(log, string(buildv1.StatusReasonBaseImagePlatformNotFound)) {
		t.Errorf("the custom pod's log does not say %s:\n%s", buildv1.StatusReasonBaseImagePlatformNotFound, log)
	}
	pods, err := theBed.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Name != b.GetName()+"-build" {
			t.Errorf("pod %s was made: the check comes before any platform's pod", p.Name)
		}
	}
}
