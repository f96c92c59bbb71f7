package image

import (
	"testing"

	"go.podman.io/image/v5/manifest"
)

// FuzzPlatformsFromIndex: whatever a registry answers, reading an index or
// manifest list never panics, and every platform it yields has a known OS
// and architecture (nodes are selected by them).
func FuzzPlatformsFromIndex(f *testing.F) {
	for _, s := range []string{
		`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1,"platform":{"os":"linux","architecture":"arm64","variant":"v8"}}]}`,
		`{"schemaVersion":2,"manifests":[{"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1,"platform":{"os":"unknown","architecture":"unknown"},"annotations":{"vnd.docker.reference.type":"attestation-manifest"}}]}`,
		`{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1,"platform":{"os":"linux","architecture":"amd64"}}]}`,
		`{"schemaVersion":2,"manifests":[{"platform":null}]}`,
		`{}`, `[]`, `null`, `{"manifests":`, "\x00",
	} {
		f.Add([]byte(s), manifest.DockerV2ListMediaType)
		f.Add([]byte(s), "application/vnd.oci.image.index.v1+json")
	}
	f.Fuzz(func(t *testing.T, blob []byte, mimeType string) {
		// What the inspection and the manifest-list assembly call on a
		// registry's answer before it gets here must not panic either.
		if m, err := manifest.FromBlob(blob, manifest.GuessMIMEType(blob)); err == nil {
			_ = m.LayerInfos()
		}
		ps, err := PlatformsFromIndex(blob, mimeType)
		if err != nil {
			return
		}
		for _, p := range ps {
			if !known(p.OS) || !known(p.Architecture) {
				t.Fatalf("PlatformsFromIndex(%q) yields %+v, with an unknown OS or architecture", blob, p)
			}
		}
	})
}
