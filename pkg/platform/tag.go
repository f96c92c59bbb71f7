package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/distribution/reference"
)

// maxTagLength is the longest tag the distribution spec allows.
const maxTagLength = 128

// Tag returns the reference a platform's image of a multi-platform build is
// pushed to: output's repository, and output's tag followed by "-" and the
// platform's canonical form as a name (NameSuffix):
//
//	registry.example.com/team/app:v1, linux/arm64    -> registry.example.com/team/app:v1-linux-arm64
//	registry.example.com/team/app:v1, linux/arm64/v8 -> registry.example.com/team/app:v1-linux-arm64
//	registry.example.com/team/app,    linux/arm/v7   -> registry.example.com/team/app:latest-linux-arm-v7
//
// The image must be in output's repository: the manifest list pushed to
// output can only list manifests its own repository holds. Every spelling of
// one platform gives the same tag. A tag that would be longer than the 128
// characters a registry accepts keeps its platform suffix and has the rest
// shortened, with 8 hex digits of a hash of the whole output tag, so that
// different long tags stay different.
//
// output must be a tag reference (no tag means "latest"); a reference by
// digest is an error, as is a platform Parse rejects. The result is written
// in full (docker.io/library/app:..., not app:...).
func Tag(output, platform string) (string, error) {
	tagged, err := ParseOutput(output)
	if err != nil {
		return "", err
	}
	p, err := Parse(platform)
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
		return "", fmt.Errorf("platform tag for %s and %s: %w", output, platform, err)
	}
	return withTag.String(), nil
}

// Tags returns Tag(output, p) for every platform, without duplicates (two
// spellings of one platform give one tag), in the order of platforms. A
// platform that gives no tag is an error; the others' tags are returned
// with it.
func Tags(output string, platforms []string) ([]string, error) {
	var tags []string
	seen := map[string]bool{}
	var errs []error
	for _, p := range platforms {
		tag, err := Tag(output, p)
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

// ParseOutput parses a Build's output reference, the manifest list's: it
// must name a tag (or nothing, meaning latest) and not a digest. The result
// is written in full, with its tag.
func ParseOutput(output string) (reference.NamedTagged, error) {
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
