package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/archway-build/archway/pkg/platform"
)

// The names of a Build's pods and the selector of its pods. build-controller
// makes the pods under these names; the builder, the kubectl plugin and the
// tests find them by the same names, so they live beside the API types
// rather than in any one program.

// maxNameLength is the longest pod name archway makes: a DNS label, so the
// name also fits the pod's hostname.
const maxNameLength = 63

// PodName returns build + "-" + suffix, shortened to 63 characters when
// longer: the build name is cut and 8 hex digits of its hash keep names of
// different long builds apart, while the suffix stays whole so the pod's
// role stays readable.
func PodName(build, suffix string) string {
	name := build + "-" + suffix
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(build))
	hash := hex.EncodeToString(sum[:])[:8]
	keep := maxNameLength - len(suffix) - len(hash) - 2
	if keep < 1 {
		// A suffix too long to keep whole: hash everything.
		sum := sha256.Sum256([]byte(name))
		return strings.TrimRight(name[:maxNameLength-17], "-.") + "-" + hex.EncodeToString(sum[:])[:16]
	}
	return strings.TrimRight(build[:keep], "-.") + "-" + hash + "-" + suffix
}

// ClassicPodName is the pod of a single-platform (classic) build, named as
// OpenShift names it: <build>-build.
func ClassicPodName(build string) string { return PodName(build, "build") }

// PlatformPodName is the pod of one platform of a build:
// <build>-<os>-<arch>[-<variant>]-build, from the platform's canonical form
// (linux/arm64/v8 and linux/arm64 give the same name).
func PlatformPodName(build, platformString string) string {
	suffix := platformString
	if p, err := platform.Parse(platformString); err == nil {
		suffix = p.NameSuffix()
	}
	return PodName(build, suffix+"-build")
}

// ManifestListPodName is the pod that pushes a build's manifest list:
// <build>-manifest-list.
func ManifestListPodName(build string) string { return PodName(build, "manifest-list") }

// LabelValue shortens a name to a valid label value (63 characters, ending
// with a letter or digit), as OpenShift does for openshift.io/build.name.
func LabelValue(name string) string {
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-_.")
}

// PodSelector is the value of a Build's pod-selector annotation: the label
// selector of all its pods.
func PodSelector(build string) string { return BuildLabel + "=" + LabelValue(build) }
