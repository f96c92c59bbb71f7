package openshift_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// mirrorOrigin is where the Builds say their base is: a registry no
// machine reaches (.invalid never resolves), as a public registry is out of
// reach from a disconnected cluster.
const mirrorOrigin = "origin.archway.invalid/team"

// allowedPolicy is the policy.json OpenShift's build controller writes for
// an image config whose allowedRegistries are scopes.
func allowedPolicy(scopes ...string) string {
	var docker []string
	for _, s := range scopes {
		docker = append(docker, fmt.Sprintf("%q:[{\"type\":\"insecureAcceptAnything\"}]", s))
	}
	d := "{" + strings.Join(docker, ",") + "}"
	return `{"default":[{"type":"reject"}],"transports":{"atomic":` + d + `,"docker":` + d +
		`,"containers-storage":{"":[{"type":"insecureAcceptAnything"}]}}}`
}

// TestCustomBuildsFollowTheClusterRegistries: OpenShift hands the custom pod
// the cluster's registries.conf and policy.json (the Build's
// <build>-sys-config ConfigMap); the custom builder hands them to every
// platform's pod. A base named at a registry no machine reaches is pulled
// through the cluster's mirror and the Build completes; once the allowed
// registries leave that registry out, the Build fails saying so.
func TestCustomBuildsFollowTheClusterRegistries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp-registries")
	if err != nil {
		t.Fatal(err)
	}
	mirror := theBed.Registry.Host + "/" + ns + "/mirrored"
	if err := theBed.Registry.CopyIndex(ctx, theBed.BaseImage, mirror+"/base:1", nil); err != nil {
		t.Fatal(err)
	}
	// As OpenShift renders an ImageTagMirrorSet.
	conf := fmt.Sprintf("[[registry]]\n  prefix = \"\"\n  location = %q\n\n  [[registry.mirror]]\n    location = %q\n    pull-from-mirror = \"tag-only\"\n",
		mirrorOrigin, mirror)
	dockerfile := "FROM " + mirrorOrigin + "/base:1\nRUN uname -m > /machine\n"

	theStandIn.setClusterRegistries(ns, map[string]string{
		registriesConfKey:  conf,
		signaturePolicyKey: allowedPolicy(strings.Split(mirrorOrigin, "/")[0], theBed.Registry.Host),
	})
	b := customBuild(t, ctx, ns, "mirrored-1", dockerfile, theBed.Registry.Host+"/"+ns+"/app:v1")
	if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Complete" {
		log, _ := podLog(ctx, ns, b.GetName()+"-build")
		t.Fatalf("Build phase = %s, want Complete (its base through the mirror); the custom pod's log:\n%s", phase, log)
	}

	theStandIn.setClusterRegistries(ns, map[string]string{
		registriesConfKey:  conf,
		signaturePolicyKey: allowedPolicy(theBed.Registry.Host),
	})
	b = customBuild(t, ctx, ns, "mirrored-2", dockerfile, theBed.Registry.Host+"/"+ns+"/app:v2")
	if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Failed" {
		t.Fatalf("Build phase = %s, want Failed (its base's registry is not allowed)", phase)
	}
	mab, err := multiArchBuild(ctx, ns, b.GetName())
	if err != nil {
		t.Fatal(err)
	}
	// The first platform refused fails the Build and stops the others.
	refused := 0
	for _, e := range mab.Status.Platforms {
		switch {
		case e.Phase == buildv1.BuildPhaseComplete:
			t.Errorf("platform %s completed: its base came from a registry that is not allowed", e.Platform)
		case e.Reason == buildv1.StatusReasonPullBuilderImageFailed && strings.Contains(e.Message, "allowed registries"):
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no platform failed %s naming the allowed registries: %+v", buildv1.StatusReasonPullBuilderImageFailed, mab.Status.Platforms)
	}
}

// waitEnd waits for the Build to end and returns its phase.
func waitEnd(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var phase string
	if err := waitFor(ctx, "Build "+name+" to end", func() (bool, error) {
		var err error
		phase, err = buildPhase(ctx, ns, name)
		return phase == "Complete" || phase == "Failed" || phase == "Error" || phase == "Cancelled", err
	}); err != nil {
		t.Fatal(err)
	}
	return phase
}
