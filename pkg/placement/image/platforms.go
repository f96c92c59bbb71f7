package image

import (
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/manifest"
)

// Annotations buildkit puts on index entries that are not runnable images.
const (
	referenceTypeAnnotation = "vnd.docker.reference.type"
	attestationManifest     = "attestation-manifest"
)

// PlatformsFromIndex returns the runnable platforms of an OCI image index
// or Docker manifest list (mimeType says which; anything but a Docker
// manifest list is read as an OCI index). Entries with no platform, an
// unknown OS or architecture (buildkit's attestations are "unknown/unknown")
// or an attestation annotation are skipped.
func PlatformsFromIndex(blob []byte, mimeType string) (Platforms, error) {
	ps := Platforms{}
	if mimeType == manifest.DockerV2ListMediaType {
		list, err := manifest.Schema2ListFromManifest(blob)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest list: %w", err)
		}
		for _, m := range list.Manifests {
			ps = append(ps, PlatformFromConfig(m.Platform.OS, m.Platform.Architecture)...)
		}
		return sortPlatforms(ps), nil
	}
	index, err := manifest.OCI1IndexFromManifest(blob)
	if err != nil {
		return nil, fmt.Errorf("reading the image index: %w", err)
	}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.Annotations[referenceTypeAnnotation] == attestationManifest {
			continue
		}
		ps = append(ps, PlatformFromConfig(m.Platform.OS, m.Platform.Architecture)...)
	}
	return sortPlatforms(ps), nil
}

// firstImage returns the digest of the first runnable image an OCI index
// or Docker manifest list names (not an attestation), "" when none.
func firstImage(blob []byte, mimeType string) (digest.Digest, error) {
	if mimeType == manifest.DockerV2ListMediaType {
		list, err := manifest.Schema2ListFromManifest(blob)
		if err != nil {
			return "", fmt.Errorf("reading the manifest list: %w", err)
		}
		if len(list.Manifests) == 0 {
			return "", nil
		}
		return list.Manifests[0].Digest, nil
	}
	index, err := manifest.OCI1IndexFromManifest(blob)
	if err != nil {
		return "", fmt.Errorf("reading the image index: %w", err)
	}
	for _, m := range index.Manifests {
		if m.Platform != nil && m.Annotations[referenceTypeAnnotation] != attestationManifest {
			return m.Digest, nil
		}
	}
	return "", nil
}

// PlatformFromConfig returns the platform of a single image from its
// config's os and architecture, or no platform when either is unknown. The
// variant is left out: nodes are selected by kubernetes.io/arch, which has
// none.
func PlatformFromConfig(os, architecture string) Platforms {
	if !known(os) || !known(architecture) {
		return Platforms{}
	}
	return Platforms{{OS: os, Architecture: architecture}}
}

func known(s string) bool { return s != "" && s != "unknown" }

// AnyArchitecture, as the OS and architecture of an image's only platform,
// says the image runs anywhere: it does not narrow a pod's architectures.
const AnyArchitecture = "*"

// operatorBundleLabelPrefix starts the config labels of an operator bundle
// image (operators.operatorframework.io.bundle.mediatype.v1, ...).
const operatorBundleLabelPrefix = "operators.operatorframework.io."

// isOperatorBundle reports whether an image config's labels mark an
// operator bundle: manifests and metadata that OLM's unpack pods only copy,
// never execute, whatever architecture the image was built for. An image
// that claims to be one only loses its own placement.
func isOperatorBundle(labels map[string]string) bool {
	for k := range labels {
		if strings.HasPrefix(k, operatorBundleLabelPrefix) {
			return true
		}
	}
	return false
}
