package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"go.podman.io/image/v5/docker"
)

func TestPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "manifest unknown", err: fmt.Errorf("reading manifest: %w", v2.ErrorCodeManifestUnknown.WithMessage("manifest unknown")), want: true},
		{name: "unauthorized", err: errcode.ErrorCodeUnauthorized.WithMessage("authentication required"), want: true},
		{name: "denied", err: errcode.ErrorCodeDenied.WithMessage("requested access to the resource is denied"), want: true},
		{name: "bad credentials", err: docker.ErrUnauthorizedForCredentials{Err: errors.New("401")}, want: true},
		{name: "malformed reference", err: &ReferenceError{Err: errors.New("invalid reference format")}, want: true},
		{name: "too many requests", err: errcode.ErrorCodeTooManyRequests.WithMessage("slow down"), want: false},
		{name: "unavailable", err: errcode.ErrorCodeUnavailable.WithMessage("try later"), want: false},
		{name: "connection refused", err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}, want: false},
		{name: "timeout", err: context.DeadlineExceeded, want: false},
		{name: "one credential refused, another timed out", err: errors.Join(errcode.ErrorCodeUnauthorized.WithMessage("no"), context.DeadlineExceeded), want: false},
		{name: "every credential refused", err: errors.Join(errcode.ErrorCodeUnauthorized.WithMessage("no"), errcode.ErrorCodeDenied.WithMessage("no")), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Permanent(tt.err); got != tt.want {
				t.Errorf("Permanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestOperatorBundle(t *testing.T) {
	if !isOperatorBundle(map[string]string{"operators.operatorframework.io.bundle.package.v1": "x"}) {
		t.Error("a bundle label was not recognised")
	}
	if isOperatorBundle(map[string]string{"operators.operatorframework.io": "x", "app": "web"}) {
		t.Error("labels without the bundle prefix were read as a bundle")
	}
	if got := (Platforms{{OS: AnyArchitecture, Architecture: AnyArchitecture}}).Architectures("linux"); !got.Has(AnyArchitecture) {
		t.Errorf("a bundle's architectures %v", got)
	}
}
