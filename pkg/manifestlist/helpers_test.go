package manifestlist

import (
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// fakeDigest is a valid sha256 digest made of one repeated hex character.
func fakeDigest(c string) digest.Digest {
	return digest.Digest("sha256:" + strings.Repeat(c, 64))
}

// statusPlatform builds a status.platforms entry for tables:
// sp("linux/arm64").complete(d).recorded("linux", "arm64", "v8").obj().
type statusPlatform struct{ p buildv1.BuildStatusPlatform }

func sp(platform string) *statusPlatform {
	return &statusPlatform{p: buildv1.BuildStatusPlatform{Platform: platform}}
}

func (s *statusPlatform) phase(phase buildv1.BuildPhase) *statusPlatform {
	s.p.Phase = phase
	return s
}

func (s *statusPlatform) complete(d digest.Digest) *statusPlatform {
	s.p.Phase = buildv1.BuildPhaseComplete
	if d != "" {
		if s.p.Output == nil {
			s.p.Output = &buildv1.BuildStatusPlatformOutput{}
		}
		s.p.Output.ImageDigest = string(d)
	}
	return s
}

func (s *statusPlatform) failed(reason buildv1.StatusReason, message string) *statusPlatform {
	s.p.Phase = buildv1.BuildPhaseFailed
	s.p.Reason = reason
	s.p.Message = message
	return s
}

func (s *statusPlatform) recorded(os, arch, variant string) *statusPlatform {
	if s.p.Output == nil {
		s.p.Output = &buildv1.BuildStatusPlatformOutput{}
	}
	s.p.Output.OS, s.p.Output.Architecture, s.p.Output.Variant = os, arch, variant
	return s
}

func (s *statusPlatform) commit(c string) *statusPlatform {
	s.p.Commit = c
	return s
}

func (s *statusPlatform) obj() buildv1.BuildStatusPlatform { return s.p }

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	return e
}
