package manifestlist

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"go.podman.io/image/v5/docker/reference"

	"github.com/archway-build/archway/pkg/build/platform"
)

// maxTagLength is the longest tag the distribution spec allows.
const maxTagLength = 128

// PlatformTag returns the reference a platform's image of a multi-platform
// build is pushed to: output's repository, and output's tag followed by "-"
// and the platform's canonical form as a name (platform.NameSuffix):
//
//	registry.example.com/team/app:v1, linux/arm64    -> registry.example.com/team/app:v1-linux-arm64
//	registry.example.com/team/app:v1, linux/arm64/v8 -> registry.example.com/team/app:v1-linux-arm64
//	registry.example.com/team/app,    linux/arm/v7   -> registry.example.com/team/app:latest-linux-arm-v7
//
// The image must be in output's repository: the manifest list pushed to output
// can only list manifests its own repository holds. Every spelling of one
// platform gives the same tag. A tag that would be longer than the 128
// characters a registry accepts keeps its platform suffix and has the rest
// shortened, with 8 hex digits of a hash of the whole output tag, so that
// different long tags stay different.
//
// output must be a tag reference (no tag means "latest"); a reference by
// digest is an error, as is a platform package platform cannot parse. The
// result is written in full (docker.io/library/app:..., not app:...).
func PlatformTag(output, platformString string) (string, error) {
	tagged, err := outputTag(output)
	if err != nil {
		return "", err
	}
	p, err := platform.Parse(platformString)
	if err != nil {
		return "", fmt.Errorf("platform tag for %s: %w", output, err)
	}
	suffix := "-" + p.NameSuffix()
	tag := tagged.Tag()
	if len(tag)+len(suffix) > maxTagLength {
		sum := sha256.Sum256([]byte(tag))
		hash := "-" + hex.EncodeToString(sum[:])[:8]
		tag = tag[:maxTagLength-len(suffix)-len(hash)] + hash
	}
	withTag, err := reference.WithTag(reference.TrimNamed(tagged), tag+suffix)
	if err != nil {
		return "", fmt.Errorf("platform tag for %s and %s: %w", output, platformString, err)
	}
	return withTag.String(), nil
}

// PlatformTags returns PlatformTag(output, p) for every platform, without
// duplicates (two spellings of one platform give one tag), in the order of
// platforms.
func PlatformTags(output string, platforms []string) ([]string, error) {
	var tags []string
	seen := map[string]bool{}
	var errs []error
	for _, p := range platforms {
		tag, err := PlatformTag(output, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[tag] {
			seen[tag] = true
			tags = append(tags, tag)
		}
	}
	return tags, errors.Join(errs...)
}

// outputTag parses a Build's output reference, which must name a tag (or
// nothing, meaning latest) and not a digest.
func outputTag(output string) (reference.NamedTagged, error) {
	named, err := reference.ParseNormalizedNamed(output)
	if err != nil {
		return nil, fmt.Errorf("output %q is not an image reference: %w", output, err)
	}
	if _, ok := named.(reference.Digested); ok {
		return nil, fmt.Errorf("output %q names a digest: a manifest list is pushed to a tag", output)
	}
	tagged, ok := reference.TagNameOnly(named).(reference.NamedTagged)
	if !ok {
		return nil, fmt.Errorf("output %q has no tag", output)
	}
	return tagged, nil
}
