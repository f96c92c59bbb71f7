package image

import (
	"encoding/json"
	"fmt"
)

// Annotations buildkit puts on index entries that are not runnable images.
const (
	referenceTypeAnnotation = "vnd.docker.reference.type"
	attestationManifest     = "attestation-manifest"
)

// indexDocument is what an OCI image index and a Docker manifest list share.
type indexDocument struct {
	Manifests []struct {
		Platform *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"manifests"`
}

// PlatformsFromIndex returns the runnable platforms of an OCI image index
// or Docker manifest list. Entries with no platform, an unknown OS or
// architecture (buildkit's attestations are "unknown/unknown") or an
// attestation annotation are skipped.
func PlatformsFromIndex(blob []byte) (Platforms, error) {
	var doc indexDocument
	if err := json.Unmarshal(blob, &doc); err != nil {
		return nil, fmt.Errorf("reading the image index: %w", err)
	}
	ps := Platforms{}
	for _, m := range doc.Manifests {
		if m.Platform == nil || m.Annotations[referenceTypeAnnotation] == attestationManifest {
			continue
		}
		p := Platform{OS: m.Platform.OS, Architecture: m.Platform.Architecture}
		if !known(p.OS) || !known(p.Architecture) {
			continue
		}
		ps = append(ps, p)
	}
	return sortPlatforms(ps), nil
}

// PlatformFromConfig returns the platform of a single image from its
// config's os and architecture, or no platform when either is unknown.
func PlatformFromConfig(os, architecture string) Platforms {
	if !known(os) || !known(architecture) {
		return Platforms{}
	}
	return Platforms{{OS: os, Architecture: architecture}}
}

func known(s string) bool { return s != "" && s != "unknown" }
