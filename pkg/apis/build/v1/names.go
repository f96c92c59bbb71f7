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

// The names are collision-free: no two (build, pod) pairs of a namespace
// give the same name, however Builds are named. A classic pod ends in
// "-build", a platform's pod in "-build-<os>-<arch>[-<variant>]" (no
// platform part ends in "build" or holds "-build-": os, architecture and
// variant come from fixed lists), the manifest-list pod in
// "-manifest-list"; so the suffix tells the kind apart, and the Build's
// name is what precedes it. A name over maxNameLength keeps a prefix and
// ends in the full SHA-256 of the whole name in hex, a 64-character segment
// no suffix above ends in: such names collide only if SHA-256 does.
// (Before, Build a's linux/amd64 pod and classic Build a-linux-amd64's pod
// were both a-linux-amd64-build.)

// maxNameLength is the longest pod name archway makes: a DNS subdomain
// (the kubelet cuts the pod's hostname to 63 characters itself).
const maxNameLength = 253

// PodName returns build + "-" + suffix, or, when that is longer than 253
// characters, its first characters and the SHA-256 of all of it.
func PodName(build, suffix string) string {
	name := build + "-" + suffix
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])
	return strings.TrimRight(name[:maxNameLength-len(hash)-1], "-.") + "-" + hash
}

// ClassicPodName is the pod of a single-platform (classic) build, named as
// OpenShift names it: <build>-build.
func ClassicPodName(build string) string { return PodName(build, "build") }

// PlatformPodName is the pod of one platform of a build:
// <build>-build-<os>-<arch>[-<variant>], from the platform's canonical form
// (linux/arm64/v8 and linux/arm64 give the same name).
func PlatformPodName(build, platformString string) string {
	suffix := platformString
	if p, err := platform.Parse(platformString); err == nil {
		suffix = p.NameSuffix()
	}
	return PodName(build, "build-"+suffix)
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

// RequireUserNamespaceFlag is the builder's flag that makes it refuse to
// build outside a user namespace of its own; build-controller passes it to
// the build pods of build.podSecurity Unprivileged (hostUsers: false).
const RequireUserNamespaceFlag = "require-user-namespace"
