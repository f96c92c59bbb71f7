package platform

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts formats, normalizes
// and names itself consistently: Parse(p.String()) is p, the canonical form parses to itself,
// and the name suffix is a DNS label.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"linux/amd64", "linux/amd64/v3", "linux/arm64", "linux/arm64/v8", "linux/arm64/v8.0",
		"linux/arm64/v9.5", "linux/arm", "linux/arm/v7", "linux/arm/v6", "linux/ppc64le/power8",
		"linux/s390x", "linux/riscv64/rva22u64", "windows/amd64", "wasip1/wasm",
		"", "/", "//", "///", "linux", "linux/", "linux//v7", "linux/arm/v7/x",
		" linux/amd64", "Linux/AMD64", "linux/x86_64", "linux/armv7l", "linux/amd64/3",
		"linux/s390x/v1", "linux/arm64/v8.0.0", "linux/\xff", "linux/İ", "\u00a0linux/arm",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Functions that take unchecked input must not panic either.
		FromUname(s)
		raw := Platform{Architecture: s}
		if suffix := raw.NameSuffix(); suffix != "" && !isDNSLabel(suffix) {
			t.Fatalf("NameSuffix of unchecked %q = %q is not a DNS label", s, suffix)
		}
		if n := raw.Normalize(); n.Normalize() != n {
			t.Fatalf("Normalize of unchecked %#v is not idempotent", raw)
		}

		p, err := Parse(s)
		if err != nil {
			if p != (Platform{}) {
				t.Fatalf("Parse(%q) returned %#v with error %v", s, p, err)
			}
			return
		}
		if got := p.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q; want the input back", s, got)
		}
		again, err := Parse(p.String())
		if err != nil || again != p {
			t.Fatalf("Parse(Parse(%q).String()) = %#v, %v; want %#v", s, again, err, p)
		}

		n := p.Normalize()
		if n.Normalize() != n {
			t.Fatalf("Normalize(%q) = %q is not idempotent", s, n)
		}
		canon, err := Parse(n.String())
		if err != nil || canon != n {
			t.Fatalf("Parse(Normalize(%q).String()) = %#v, %v; want %#v", s, canon, err, n)
		}
		if p.Key() != n.String() || !p.Equal(n) || !n.Equal(p) {
			t.Fatalf("%q and its canonical form %q differ by Key or Equal", s, n)
		}
		if !Matches(p, p) || !Matches(p, n) || !Matches(n, p) {
			t.Fatalf("%q does not match itself or its canonical form %q", s, n)
		}
		if suffix := p.NameSuffix(); !isDNSLabel(suffix) || suffix != n.NameSuffix() {
			t.Fatalf("NameSuffix(%q) = %q is not a DNS label equal to its canonical form's", s, suffix)
		}
		if back := FromOCI(p.OCI()); back != p {
			t.Fatalf("FromOCI(%q.OCI()) = %#v", s, back)
		}
		if back, ok := FromNodeLabels(p.NodeSelector()); !ok || !Matches(p, back) {
			t.Fatalf("FromNodeLabels(%q.NodeSelector()) = %#v, %v", s, back, ok)
		}
		if _, err := ParseList([]string{s, n.String()}); err == nil {
			t.Fatalf("ParseList accepted %q next to its canonical form %q", s, n)
		}
	})
}

// FuzzTag checks that Tag never panics, and that what it returns is a
// reference to a tag of output's repository no longer than a registry
// accepts, the same for every spelling of the platform, and different for
// different output tags.
func FuzzTag(f *testing.F) {
	long := strings.Repeat("a", 127)
	for _, seed := range []struct{ output, platform string }{
		{"registry.example.com/team/app:v1", "linux/arm64"},
		{"registry.example.com/team/app:v1", "linux/arm64/v8"},
		{"127.0.0.1:5000/app", "linux/arm"},
		{"app:1", "linux/ppc64le"},
		{"r.example.com/app:" + long, "linux/arm64/v9.5"},
		{"r.example.com/app@sha256:" + strings.Repeat("0", 64), "linux/amd64"},
		{"R.example.com/App:v1", "linux/amd64"},
		{"r.example.com/app:v1", "linux/aarch64"},
		{"", ""},
		{"r.example.com/app:-", "linux/riscv64/rva23u64"},
	} {
		f.Add(seed.output, seed.platform)
	}
	f.Fuzz(func(t *testing.T, output, platform string) {
		got, err := Tag(output, platform)
		if err != nil {
			if got != "" {
				t.Fatalf("Tag(%q, %q) = %q with error %v", output, platform, got, err)
			}
			return
		}
		named, err := reference.ParseNormalizedNamed(got)
		if err != nil {
			t.Fatalf("Tag(%q, %q) = %q, not a reference: %v", output, platform, got, err)
		}
		tagged, ok := named.(reference.NamedTagged)
		if _, digested := named.(reference.Digested); !ok || digested {
			t.Fatalf("Tag(%q, %q) = %q, not a reference to a tag", output, platform, got)
		}
		out, _ := reference.ParseNormalizedNamed(output)
		if named.Name() != out.Name() {
			t.Fatalf("Tag(%q, %q) = %q is in another repository than %s", output, platform, got, out.Name())
		}
		if len(tagged.Tag()) > maxTagLength {
			t.Fatalf("Tag(%q, %q) = %q: tag longer than %d", output, platform, got, maxTagLength)
		}
		p, _ := Parse(platform)
		if !strings.HasSuffix(tagged.Tag(), "-"+p.NameSuffix()) {
			t.Fatalf("Tag(%q, %q) = %q does not end in the platform's name %q", output, platform, got, p.NameSuffix())
		}
		if canon, err := Tag(output, p.Normalize().String()); err != nil || canon != got {
			t.Fatalf("Tag(%q) for %q = %q and for its canonical form %q = %q, %v", output, platform, got, p.Key(), canon, err)
		}
		if outTagged, ok := reference.TagNameOnly(out).(reference.NamedTagged); ok {
			other, err := reference.WithTag(out, outTagged.Tag()+"x")
			if err != nil {
				return // the output's tag is as long as a tag can be
			}
			if sibling, err := Tag(other.String(), platform); err == nil && sibling == got {
				t.Fatalf("Tag gives %q for both %s and %s", got, output, other)
			}
		}
	})
}
