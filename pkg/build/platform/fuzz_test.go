package platform

import "testing"

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
