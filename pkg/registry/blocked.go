package registry

import (
	"fmt"

	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
)

// BlockedError says that an image is on a registry the cluster's registry
// configuration blocks (blocked = true in the registries ConfigMap, or a
// mirror set's mirrorSourcePolicy NeverContactSource), and that no mirror
// serves the reference: neither pulled nor pushed.
type BlockedError struct {
	// Image is the image as the build names it.
	Image string
	// Registry is the blocked prefix that matched.
	Registry string
	// DigestMirrors is set when the registry has mirrors for digest
	// references only and Image names a tag (an ImageDigestMirrorSet's
	// mirrors); TagMirrors when it has mirrors for tags only and Image
	// names a digest.
	DigestMirrors, TagMirrors bool
	// Push is set when Image is pushed rather than pulled.
	Push bool
	// NotAllowed is set when Registry is blocked because it is not among
	// the allowed registries (OpenShift's image config allowedRegistries);
	// mirrors do not serve it then.
	NotAllowed bool
}

func (e *BlockedError) Error() string {
	if e.NotAllowed {
		return fmt.Sprintf("image %s: registry %s is not among the allowed registries (image.config.openshift.io/cluster spec.registrySources.allowedRegistries): use an image from an allowed registry, or ask an administrator to allow it", e.Image, e.Registry)
	}
	msg := fmt.Sprintf("image %s: registry %s is blocked by the cluster's registry configuration (blocked = true, or a mirror set's mirrorSourcePolicy NeverContactSource)", e.Image, e.Registry)
	switch {
	case e.Push:
		return msg + ": nothing is pushed to it; push to another registry"
	case e.DigestMirrors:
		return msg + ", and its mirrors serve digest references only: name the image by digest (image@sha256:...), or ask an administrator for an ImageTagMirrorSet"
	case e.TagMirrors:
		return msg + ", and its mirrors serve tag references only: name the image by tag, or ask an administrator for an ImageDigestMirrorSet"
	}
	return msg + ", and no mirror serves it: use an image from another registry, or ask an administrator for a mirror"
}

// CheckBlocked fails with a *BlockedError when ref is on a registry sys's
// registries.conf blocks and, for a pull, no mirror serves its kind of
// reference (a push goes to the registry itself, mirrors or not), or when
// sys's signature policy is an AllowedPolicy that leaves ref's registry
// out: containers/image refuses it too, in words that name its files.
func CheckBlocked(sys *types.SystemContext, ref string, push bool) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil // the pull says what is wrong with it
	}
	named = reference.TagNameOnly(named)
	// Outside the allowed registries: the policy refuses it, mirrors or
	// not (a push is refused by build-controller before any pod).
	if allowed, restricted, err := PolicyAllowed(sys.SignaturePolicyPath); err != nil {
		return err
	} else if restricted && !ScopeAllows(allowed, named.Name()) {
		return &BlockedError{Image: ref, Registry: reference.Domain(named), NotAllowed: true, Push: push}
	}
	reg, err := sysregistriesv2.FindRegistry(sys, named.Name())
	if err != nil {
		return fmt.Errorf("the registries.conf: %w", err)
	}
	if reg == nil || !reg.Blocked {
		return nil
	}
	blocked := &BlockedError{Image: ref, Registry: reg.Prefix, Push: push}
	if push {
		return blocked
	}
	sources, err := reg.PullSourcesFromReference(named)
	if err != nil || len(sources) > 1 {
		return nil // a mirror serves it; the source itself is not contacted
	}
	_, byDigest := named.(reference.Canonical)
	for _, m := range reg.Mirrors {
		switch {
		case !byDigest && (reg.MirrorByDigestOnly || m.PullFromMirror == sysregistriesv2.MirrorByDigestOnly):
			blocked.DigestMirrors = true
		case byDigest && m.PullFromMirror == sysregistriesv2.MirrorByTagOnly:
			blocked.TagMirrors = true
		}
	}
	return blocked
}
