package manifestlist

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	imgspec "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

// Child is one image the manifest list lists: its entry, and what the
// registry holds for it.
type Child struct {
	Entry
	// MediaType is the media type of the image's manifest: OCI image
	// manifest or Docker schema 2.
	MediaType string
	// Size is the size of the manifest in bytes.
	Size int64
	// Config is the platform the image's config gives: os, architecture,
	// variant, os.version and os.features.
	Config ocispec.Platform
}

// IndexDescriptors returns the manifest list's entries for children: each
// child's digest, size and media type, and its full platform. The platform
// is the image config's; a variant or os.version the config leaves out is
// taken from what the builder recorded, and a variant still missing from the
// platform the child was built for (linux/arm/v7 stays v7 even when the config
// forgot it, so that clients pick the right image). The entries are sorted
// by os, architecture, variant, os.version and digest, so the same children
// always give the same list.
//
// Two children for the same platform, or a child whose manifest is not an
// image manifest, are an error with reason ManifestListFailed.
func IndexDescriptors(children []Child) ([]ocispec.Descriptor, error) {
	descs, _, err := indexEntries(children)
	return descs, err
}

// indexEntries returns the index's descriptors and, in the same order, the
// children they describe.
func indexEntries(children []Child) ([]ocispec.Descriptor, []Child, error) {
	if len(children) == 0 {
		return nil, nil, &Error{Reason: buildv1.StatusReasonManifestListFailed, Err: errors.New("a manifest list needs at least one image")}
	}
	type entry struct {
		desc  ocispec.Descriptor
		child Child
	}
	entries := make([]entry, 0, len(children))
	owner := map[string]string{}
	for _, c := range children {
		switch c.MediaType {
		case ocispec.MediaTypeImageManifest, manifest.DockerV2Schema2MediaType:
		default:
			return nil, nil, &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: c.Platform,
				Err: fmt.Errorf("platform %s: %s is a %q, not an image manifest a manifest list can list", c.Platform, c.Digest, c.MediaType)}
		}
		p := childPlatform(c)
		key := platformKeyOCI(p)
		if other, dup := owner[key]; dup {
			return nil, nil, &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: c.Platform,
				Err: fmt.Errorf("platforms %s and %s are both images for %s: a manifest list can list a platform once", other, c.Platform, key)}
		}
		owner[key] = c.Platform
		entries = append(entries, entry{
			desc: ocispec.Descriptor{
				MediaType: c.MediaType,
				Digest:    c.Digest,
				Size:      c.Size,
				Platform:  &p,
			},
			child: c,
		})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		pa, pb := a.desc.Platform, b.desc.Platform
		return cmp.Or(
			cmp.Compare(pa.OS, pb.OS),
			cmp.Compare(pa.Architecture, pb.Architecture),
			cmp.Compare(pa.Variant, pb.Variant),
			cmp.Compare(pa.OSVersion, pb.OSVersion),
			cmp.Compare(a.desc.Digest, b.desc.Digest),
		)
	})
	descs := make([]ocispec.Descriptor, len(entries))
	ordered := make([]Child, len(entries))
	for i, e := range entries {
		descs[i], ordered[i] = e.desc, e.child
	}
	return descs, ordered, nil
}

// childPlatform is the platform a child is listed under (see
// IndexDescriptors).
func childPlatform(c Child) ocispec.Platform {
	p := ocispec.Platform{
		OS:           c.Config.OS,
		Architecture: c.Config.Architecture,
		Variant:      c.Config.Variant,
		OSVersion:    c.Config.OSVersion,
		OSFeatures:   slices.Clone(c.Config.OSFeatures),
	}
	if p.OS == "" {
		p.OS = c.Recorded.OS
	}
	if p.Architecture == "" {
		p.Architecture = c.Recorded.Architecture
	}
	if p.Variant == "" {
		p.Variant = c.Recorded.Variant
	}
	if p.Variant == "" {
		if want, err := platform.Parse(c.Platform); err == nil && want.OS == p.OS && want.Architecture == p.Architecture {
			p.Variant = want.Normalize().Variant
		}
	}
	if p.OSVersion == "" {
		p.OSVersion = c.Recorded.OSVersion
	}
	if len(p.OSFeatures) == 0 {
		p.OSFeatures = slices.Clone(c.Recorded.OSFeatures)
	}
	return p
}

// platformKeyOCI is the key under which two index entries are the same
// platform: the canonical os/arch/variant plus os.version.
func platformKeyOCI(p ocispec.Platform) string {
	key := platform.FromOCI(p).Key()
	if p.OSVersion != "" {
		key += " (os.version " + p.OSVersion + ")"
	}
	return key
}

// BuildIndex returns the manifest list for children and its media type: a
// Docker manifest list (application/vnd.docker.distribution.manifest.list.v2+json)
// when every child is a Docker schema 2 manifest, which is what clients that
// read Docker manifests expect, and an OCI image index otherwise. The bytes
// are what is pushed; their digest is the list's digest.
func BuildIndex(children []Child) (list []byte, mediaType string, err error) {
	descs, err := IndexDescriptors(children)
	if err != nil {
		return nil, "", err
	}
	if allDockerSchema2(descs) {
		components := make([]manifest.Schema2ManifestDescriptor, 0, len(descs))
		for _, d := range descs {
			var c manifest.Schema2ManifestDescriptor
			c.MediaType = d.MediaType
			c.Digest = d.Digest
			c.Size = d.Size
			c.Platform = manifest.Schema2PlatformSpec{
				Architecture: d.Platform.Architecture,
				OS:           d.Platform.OS,
				OSVersion:    d.Platform.OSVersion,
				OSFeatures:   d.Platform.OSFeatures,
				Variant:      d.Platform.Variant,
			}
			components = append(components, c)
		}
		list, err := manifest.Schema2ListFromComponents(components).Serialize()
		if err != nil {
			return nil, "", err
		}
		return list, manifest.DockerV2ListMediaType, nil
	}
	index := ocispec.Index{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: descs,
	}
	list, err = json.Marshal(index)
	if err != nil {
		return nil, "", err
	}
	return list, ocispec.MediaTypeImageIndex, nil
}

func allDockerSchema2(descs []ocispec.Descriptor) bool {
	for _, d := range descs {
		if d.MediaType != manifest.DockerV2Schema2MediaType {
			return false
		}
	}
	return true
}
