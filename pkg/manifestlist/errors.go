package manifestlist

import (
	"errors"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Error is why no manifest list was pushed, in the words a Build's status
// uses: a reason, and the platform it concerns when there is one.
type Error struct {
	// Reason is the status reason: PlatformVersionSkew, PlatformBuildFailed
	// or ManifestListFailed.
	Reason buildv1.StatusReason
	// Platform is the platform at fault, as the Build spells it; empty when
	// the error concerns no single platform.
	Platform string
	// Err says what happened, naming the platform.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason of the first *Error in err's tree, or
// ManifestListFailed when there is none (a registry that cannot be reached,
// credentials it refuses). It returns "" for a nil err.
func ReasonOf(err error) buildv1.StatusReason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return buildv1.StatusReasonManifestListFailed
}

func skewError(platform string, err error) *Error {
	return &Error{Reason: buildv1.StatusReasonPlatformVersionSkew, Platform: platform, Err: err}
}
