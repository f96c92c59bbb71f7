package registries

import (
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
)

// DigestMirrorRegistries translates ImageDigestMirrorSets into registries
// as OpenShift's nodes get them: one entry per source whose mirrors serve
// digest references only, blocked when any set says NeverContactSource for
// it. Sets are taken in name order, mirrors in the order listed.
func DigestMirrorRegistries(sets []configv1.ImageDigestMirrorSet) []sysregistriesv2.Registry {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, func(a, b configv1.ImageDigestMirrorSet) int { return strings.Compare(a.Name, b.Name) })
	var out []sysregistriesv2.Registry
	for _, set := range sets {
		for _, m := range set.Spec.ImageDigestMirrors {
			out = append(out, mirrored(m.Source, m.Mirrors, m.MirrorSourcePolicy, sysregistriesv2.MirrorByDigestOnly))
		}
	}
	return out
}

// TagMirrorRegistries translates ImageTagMirrorSets: their mirrors serve
// tag references only.
func TagMirrorRegistries(sets []configv1.ImageTagMirrorSet) []sysregistriesv2.Registry {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, func(a, b configv1.ImageTagMirrorSet) int { return strings.Compare(a.Name, b.Name) })
	var out []sysregistriesv2.Registry
	for _, set := range sets {
		for _, m := range set.Spec.ImageTagMirrors {
			out = append(out, mirrored(m.Source, m.Mirrors, m.MirrorSourcePolicy, sysregistriesv2.MirrorByTagOnly))
		}
	}
	return out
}

// mirrored is the registry entry of one source. A wildcard source
// (*.example.com) has no location of its own: its references keep their
// host.
func mirrored(source string, mirrors []configv1.ImageMirror, policy configv1.MirrorSourcePolicy, pull string) sysregistriesv2.Registry {
	r := sysregistriesv2.Registry{Prefix: source, Endpoint: sysregistriesv2.Endpoint{Location: source}}
	if strings.HasPrefix(source, "*.") {
		r.Location = ""
	}
	r.Blocked = policy == configv1.NeverContactSource
	for _, m := range mirrors {
		ep := sysregistriesv2.Endpoint{Location: string(m), PullFromMirror: pull}
		if string(m) != source && !slices.Contains(r.Mirrors, ep) {
			r.Mirrors = append(r.Mirrors, ep)
		}
	}
	return r
}
