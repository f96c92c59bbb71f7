package platform

import (
	"slices"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
)

// FromOCI returns the os, architecture and variant of an image config's or index entry's
// platform as they are written there, without checking them. OS version and OS features are
// dropped: a platform string cannot say them.
func FromOCI(o ocispec.Platform) Platform {
	return Platform{OS: o.OS, Architecture: o.Architecture, Variant: o.Variant}
}

// OCI returns p as an image-spec platform, spelled as p is: call Normalize first for the
// canonical spelling.
func (p Platform) OCI() ocispec.Platform {
	return ocispec.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
}

// FromNodeLabels returns the platform a node's kubernetes.io/os and kubernetes.io/arch labels
// say, with no variant: Kubernetes has no label for it. ok is false when a label is missing or
// the pair is not one Parse would accept.
func FromNodeLabels(labels map[string]string) (p Platform, ok bool) {
	p = Platform{OS: labels[corev1.LabelOSStable], Architecture: labels[corev1.LabelArchStable]}
	if p.OS == "" || p.Architecture == "" || p.check() != nil {
		return Platform{}, false
	}
	return p, true
}

// NodeSelector returns the node labels a pod needs to run on p: kubernetes.io/os and
// kubernetes.io/arch. The variant is not in it, as Kubernetes has no variant label: a pod
// for linux/amd64/v3 may land on an amd64 node of any level, and a cluster that mixes levels
// needs a label of its own (node-feature-discovery's, for example) to tell them apart.
func (p Platform) NodeSelector() map[string]string {
	return map[string]string{
		corev1.LabelOSStable:   p.OS,
		corev1.LabelArchStable: p.Architecture,
	}
}

// FromUname returns the Go/OCI architecture and variant for the machine name `uname -m`
// prints (x86_64, aarch64, armv7l, ppc64le, s390x, riscv64, ...), ignoring surrounding space.
// It also takes Go names and the other spellings Parse points away from (armhf, ppc64el).
// variant is empty where uname cannot tell it (amd64 levels, arm64 versions); Matches treats
// an empty variant as matching any. ok is false for names it does not know, and for mips and
// mips64, whose uname names do not say the byte order.
func FromUname(machine string) (arch, variant string, ok bool) {
	machine = strings.TrimSpace(machine)
	if a, ok := aliases[machine]; ok {
		return a.arch, a.variant, true
	}
	if _, ok := lookupArch(machine); ok && !slices.Contains([]string{"mips", "mips64"}, machine) {
		return machine, "", true
	}
	return "", "", false
}
