package manifestlist

import (
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

// Entry is one platform's image that goes into the manifest list, as its
// builder recorded it in the Build's status.
type Entry struct {
	// Platform is the platform the image was built for, as the Build spells
	// it (e.g. "linux/arm64").
	Platform string
	// Digest is the digest of the image's manifest in the output
	// repository.
	Digest digest.Digest
	// Recorded is the platform the builder read back from the pushed
	// image's config; the zero value when it recorded none.
	Recorded ocispec.Platform
}

// Entries turns the platforms Select included into entries for Assemble,
// checking what each builder recorded (CheckRecorded). Every platform's
// problems are reported, joined; each is an *Error naming its platform.
func Entries(included []buildv1.BuildStatusPlatform) ([]Entry, error) {
	entries := make([]Entry, 0, len(included))
	var errs []error
	for _, p := range included {
		if err := CheckRecorded(p); err != nil {
			errs = append(errs, err)
			continue
		}
		o := p.Output
		entries = append(entries, Entry{
			Platform: p.Platform,
			Digest:   digest.Digest(o.ImageDigest),
			Recorded: ocispec.Platform{
				OS: o.OS, Architecture: o.Architecture, Variant: o.Variant,
				OSVersion: o.OSVersion, OSFeatures: o.OSFeatures,
			},
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return entries, nil
}

// CheckRecorded reports version skew in what a succeeded platform's builder
// recorded: no image digest (a builder that predates multi-platform builds
// pushes to the build's output and writes the build's own status, so its
// platform entry says Complete with nothing to list), a digest that is not a
// digest, or a recorded os/architecture/variant that is not the platform it
// was asked to build (a builder that built for its own node instead). The
// error is an *Error with reason PlatformVersionSkew naming the platform.
// Platforms that did not succeed are not checked.
func CheckRecorded(p buildv1.BuildStatusPlatform) error {
	if p.Phase != buildv1.BuildPhaseComplete {
		return nil
	}
	if p.Output == nil || p.Output.ImageDigest == "" {
		return skewError(p.Platform, fmt.Errorf(
			"platform %s is Complete but recorded no image digest: its builder may not know multi-platform builds (version skew), so its image cannot be listed",
			p.Platform))
	}
	if err := digest.Digest(p.Output.ImageDigest).Validate(); err != nil {
		return skewError(p.Platform, fmt.Errorf("platform %s recorded image digest %q, which is not a digest: %w",
			p.Platform, p.Output.ImageDigest, err))
	}
	if p.Output.OS == "" && p.Output.Architecture == "" {
		return nil // nothing recorded to compare; the image config is checked later
	}
	recorded := platform.Platform{OS: p.Output.OS, Architecture: p.Output.Architecture, Variant: p.Output.Variant}
	return matchPlatform(p.Platform, recorded, "its builder recorded")
}

// CheckChild reports version skew between the platform an image was built
// for and the platform its image config says (config): os and architecture
// must be the same, and a variant, when the config has one, the same after
// normalization (an arm64 image that says v8 is linux/arm64). The error is an
// *Error with reason PlatformVersionSkew naming the platform.
func CheckChild(e Entry, config ocispec.Platform) error {
	return matchPlatform(e.Platform, platform.FromOCI(config), "its image config ("+e.Digest.String()+") says")
}

func matchPlatform(wantString string, have platform.Platform, source string) error {
	want, err := platform.Parse(wantString)
	if err != nil {
		return &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: wantString,
			Err: fmt.Errorf("platform %s: %w", wantString, err)}
	}
	if platform.Matches(want, have) {
		return nil
	}
	return skewError(wantString, fmt.Errorf("platform %s was built for another platform: %s %s (version skew: the image would be listed under the wrong platform)",
		wantString, source, describePlatform(have)))
}

func describePlatform(p platform.Platform) string {
	if p.OS == "" && p.Architecture == "" {
		return "no platform"
	}
	return strings.TrimSuffix(p.String(), "/")
}
