// Package platform parses, compares and converts the target platforms of a multi-arch build:
// the "os/arch" and "os/arch/variant" strings in a Build's spec.platforms, the platform fields of
// OCI image configs and indexes, and the kubernetes.io/os and kubernetes.io/arch node labels; and
// it names the tag each platform's image is pushed to (Tag). It is a leaf: it imports nothing of
// archway and no containers/image, so that the API types, the build controller, the builder and
// placement can all share it.
//
// Names are Go's (GOOS, GOARCH, and the image spec's variants), which is what the image spec,
// Kubernetes node labels and buildah use. Parse rejects other spellings (x86_64, aarch64, armhf)
// and says which name to write instead.
//
// Some platforms have more than one spelling. The canonical form, which Normalize returns, leaves
// out the variant an architecture implies and writes arm's:
//
//	linux/amd64, linux/amd64/v1                     -> linux/amd64
//	linux/arm64, linux/arm64/v8, linux/arm64/v8.0   -> linux/arm64
//	linux/arm, linux/arm/v7                         -> linux/arm/v7
//	linux/ppc64le, linux/ppc64le/power8             -> linux/ppc64le
//	linux/riscv64, linux/riscv64/rva20u64           -> linux/riscv64
//
// This is the form Docker and containerd users write. buildah records linux/arm64 as
// architecture arm64 with variant v8 in the image config; Equal and Matches treat the two as one.
package platform

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Platform is a target platform as a platform string can say it. OS version and OS features,
// which image configs may also carry, cannot be written in a platform string and are left out.
type Platform struct {
	OS           string
	Architecture string
	Variant      string
}

// Parse parses "os/arch" or "os/arch/variant" and keeps the spelling it was given (call
// Normalize for the canonical form). Every part must be lowercase, without spaces, and a Go/OCI
// name: the errors say what to write instead.
func Parse(s string) (Platform, error) {
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		if trimmed := strings.Join(strings.Fields(s), ""); trimmed != "" {
			return Platform{}, fmt.Errorf("%q: remove the spaces (%q)", s, trimmed)
		}
	}
	if strings.IndexFunc(s, unicode.IsUpper) >= 0 {
		return Platform{}, fmt.Errorf("%q: use lowercase (%q)", s, strings.ToLower(s))
	}
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return Platform{}, fmt.Errorf("%q is not os/arch or os/arch/variant (e.g. linux/arm64)", s)
	}
	p := Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	if err := p.check(); err != nil {
		return Platform{}, fmt.Errorf("%q: %w", s, err)
	}
	return p, nil
}

// check reports why the parts of p are not Go/OCI names, saying what to write instead.
func (p Platform) check() error {
	if !slices.Contains(operatingSystems, p.OS) {
		return fmt.Errorf("os %q is not a Go/OCI os name; use one of %s", p.OS, oneOf(operatingSystems))
	}
	arch, ok := lookupArch(p.Architecture)
	if !ok {
		if a, ok := aliases[p.Architecture]; ok {
			if a.variant == "" {
				return fmt.Errorf("architecture %q is not a Go/OCI architecture name; use %q", p.Architecture, a.arch)
			}
			return fmt.Errorf("architecture %q is not a Go/OCI architecture name; use %q with variant %q (%s/%s/%s)",
				p.Architecture, a.arch, a.variant, p.OS, a.arch, a.variant)
		}
		return fmt.Errorf("architecture %q is not a Go/OCI architecture name; use one of %s",
			p.Architecture, oneOf(KnownArchitectures()))
	}
	switch {
	case p.Variant == "" || slices.Contains(arch.variants, p.Variant):
		return nil
	case len(arch.variants) == 0:
		return fmt.Errorf("architecture %q has no variants; use %q", p.Architecture, p.OS+"/"+p.Architecture)
	case slices.Contains(arch.variants, "v"+p.Variant):
		return fmt.Errorf("variant %q is not a variant of %s; use %q", p.Variant, p.Architecture, "v"+p.Variant)
	default:
		return fmt.Errorf("variant %q is not a variant of %s; use one of %s", p.Variant, p.Architecture, oneOf(arch.variants))
	}
}

// ParseList parses the platforms of a Build in order. Errors name the index of the bad entry
// (platforms[2]: ...); two entries that are the same platform after normalization (linux/arm64
// and linux/arm64/v8) are an error naming both. All errors are returned, joined.
func ParseList(ss []string) ([]Platform, error) {
	var errs []error
	ps := make([]Platform, 0, len(ss))
	first := make(map[Platform]int, len(ss))
	for i, s := range ss {
		p, err := Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("platforms[%d]: %w", i, err))
			continue
		}
		key := p.Normalize()
		if j, dup := first[key]; dup {
			errs = append(errs, fmt.Errorf("platforms[%d]: %q is the same platform as platforms[%d] (%q); remove one of them",
				i, s, j, ss[j]))
			continue
		}
		first[key] = i
		ps = append(ps, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ps, nil
}

// String formats p as written, without normalizing it: "os/arch", or "os/arch/variant" when p
// has a variant. Parse(p.String()) returns p for every p that Parse returned. The zero Platform
// formats as "".
func (p Platform) String() string {
	if p == (Platform{}) {
		return ""
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Normalize returns the canonical spelling of p (see the package documentation). A platform
// whose architecture archway does not know is returned unchanged.
func (p Platform) Normalize() Platform {
	arch, ok := lookupArch(p.Architecture)
	if !ok {
		return p
	}
	// v8.0 is v8: cut ".0" from a minor version, but only where a major version remains, so
	// that a second Normalize changes nothing.
	if major, ok := strings.CutSuffix(p.Variant, ".0"); ok && !strings.Contains(major, ".") &&
		slices.Contains(arch.variants, major) {
		p.Variant = major
	}
	switch {
	case arch.implied == "":
	case arch.spelled && p.Variant == "":
		p.Variant = arch.implied
	case !arch.spelled && p.Variant == arch.implied:
		p.Variant = ""
	}
	return p
}

// Key returns the canonical string of p, the same for all spellings of one platform: use it
// to key maps and to find duplicates.
func (p Platform) Key() string {
	return p.Normalize().String()
}

// Equal reports whether p and q are the same platform, however each is spelled.
func (p Platform) Equal(q Platform) bool {
	return p.Normalize() == q.Normalize()
}

// Matches reports whether have, the platform an image config records or a build pod reports,
// is the platform want asked for. Unlike Equal, an empty have.Variant matches any variant of
// want's os and architecture: image configs often leave the variant out, and uname -m (see
// FromUname) cannot tell amd64 levels or arm64 versions apart. A have variant that is set must
// be want's after normalization, so an amd64/v3 image does not match a request for amd64.
func Matches(want, have Platform) bool {
	if want.OS != have.OS || want.Architecture != have.Architecture {
		return false
	}
	return have.Variant == "" || want.Normalize().Variant == have.Normalize().Variant
}

// NameSuffix returns the canonical form of p as a DNS label for pod and object names:
// linux-amd64, linux-arm64, linux-arm-v7, linux-arm64-v8-2. Characters a label cannot hold
// become dashes, and the result is cut to 63 characters.
func (p Platform) NameSuffix() string {
	s := []byte(strings.ToLower(p.Normalize().String()))
	for i, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			s[i] = '-'
		}
	}
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(string(s), "-")
}
