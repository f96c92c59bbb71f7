package image

import (
	"errors"
	"net/http"

	"github.com/docker/distribution/registry/api/errcode"
	"go.podman.io/image/v5/docker"
)

// ReferenceError is an image reference that does not parse: no registry
// is asked, and asking again changes nothing.
type ReferenceError struct{ Err error }

func (e *ReferenceError) Error() string { return e.Err.Error() }
func (e *ReferenceError) Unwrap() error { return e.Err }

// permanentCodes are the registry error codes (OCI distribution spec)
// that say the image or the access to it is not there: retrying gives the
// same answer until someone pushes the image or grants access, which is no
// reason to hold a pod.
var permanentCodes = map[string]bool{
	"MANIFEST_UNKNOWN": true, "NAME_UNKNOWN": true, "NAME_INVALID": true, "TAG_INVALID": true,
	"UNAUTHORIZED": true, "DENIED": true,
}

// Permanent reports whether an inspection error is an answer that a retry
// would only repeat: a malformed reference, a manifest or repository the
// registry does not know, credentials it refuses or access it denies, a
// blocked registry.
// Everything else (connection refused, timeouts, 429, 5xx, an answer that
// does not parse) is transient. An error joining the failures of several
// credentials is permanent only when each of them is.
//
// containers/image (go.podman.io/image/v5 v5.41.0) decodes registry
// errors into github.com/docker/distribution's errcode types, so those are
// the ones matched (as pkg/manifestlist does).
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		for _, e := range errs {
			if !Permanent(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	var refErr *ReferenceError
	var blocked *BlockedError
	if errors.As(err, &refErr) || errors.As(err, &blocked) {
		return true
	}
	var unauthorized docker.ErrUnauthorizedForCredentials
	if errors.As(err, &unauthorized) {
		return true
	}
	var ec errcode.Error
	if errors.As(err, &ec) {
		return permanentCodes[ec.Code.Descriptor().Value]
	}
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) {
		switch status.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
	}
	return false
}

// BlockedError is an image on a registry the registry configuration
// blocks, with no mirror to pull it from: no node will pull it, so asking
// again changes nothing.
type BlockedError struct {
	// Image is the reference, Registry the blocking entry's prefix.
	Image, Registry string
}

func (e *BlockedError) Error() string {
	return "registry " + e.Registry + " is blocked by the registry configuration; no node pulls " + e.Image
}
