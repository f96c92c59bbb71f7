package platform

import "strings"

// operatingSystems are Go's GOOS values, which the image spec asks images to use for os.
var operatingSystems = []string{
	"linux", "windows", "aix", "android", "darwin", "dragonfly", "freebsd", "illumos",
	"ios", "js", "netbsd", "openbsd", "plan9", "solaris", "wasip1",
}

// architecture holds what archway knows about one Go/OCI architecture name.
type architecture struct {
	name string

	// variants are the variants Parse accepts, in the order error messages list them.
	// An architecture without variants takes none.
	variants []string

	// implied is the variant a platform without one means (Go's default for that architecture).
	implied string

	// spelled makes the canonical form write the implied variant instead of leaving it out.
	// Only arm: 32-bit arm images are published for v5, v6 and v7 side by side, so a bare
	// "arm" is ambiguous to a reader even though it means v7.
	spelled bool
}

// architectures are Go's GOARCH values, most used in container images first. The variants are
// the image spec's table (arm, arm64, ppc64le, riscv64, amd64) filled in from the values the Go
// toolchain accepts for GOARM, GOARM64, GOPPC64, GORISCV64 and GOAMD64 (arm v5 is Docker's arm32v5).
var architectures = []architecture{
	{name: "amd64", variants: []string{"v1", "v2", "v3", "v4"}, implied: "v1"},
	{name: "arm64", variants: arm64Variants, implied: "v8"},
	{name: "ppc64le", variants: []string{"power8", "power9", "power10"}, implied: "power8"},
	{name: "s390x"},
	{name: "arm", variants: []string{"v5", "v6", "v7", "v8"}, implied: "v7", spelled: true},
	{name: "386"},
	{name: "riscv64", variants: []string{"rva20u64", "rva22u64", "rva23u64"}, implied: "rva20u64"},
	{name: "mips64le"},
	{name: "loong64"},
	{name: "ppc64", variants: []string{"power8", "power9", "power10"}, implied: "power8"},
	{name: "mips"},
	{name: "mipsle"},
	{name: "mips64"},
	{name: "wasm"},
}

// arm64Variants are GOARM64's values plus the major versions on their own, as the image spec
// writes them. v8 and v8.0 (v9 and v9.0) are the same variant.
var arm64Variants = []string{
	"v8", "v8.0", "v8.1", "v8.2", "v8.3", "v8.4", "v8.5", "v8.6", "v8.7", "v8.8", "v8.9",
	"v9", "v9.0", "v9.1", "v9.2", "v9.3", "v9.4", "v9.5",
}

// alias is what a non-Go architecture name (uname -m, Debian, Docker Hub namespaces) means.
type alias struct {
	arch, variant string
}

// aliases map the architecture names other tools print to Go/OCI names. Parse rejects them
// with a suggestion; FromUname translates them. Big-endian arm and mips names are missing on
// purpose: "mips" and "mips64" from uname do not say the byte order.
var aliases = map[string]alias{
	// amd64 and 386.
	"x86_64": {arch: "amd64"},
	"x86-64": {arch: "amd64"},
	"x64":    {arch: "amd64"},
	"i386":   {arch: "386"},
	"i486":   {arch: "386"},
	"i586":   {arch: "386"},
	"i686":   {arch: "386"},
	"x86":    {arch: "386"},

	// 64-bit arm.
	"aarch64": {arch: "arm64"},
	"arm64v8": {arch: "arm64"},

	// 32-bit arm.
	"armv5l":    {arch: "arm", variant: "v5"},
	"armv5tel":  {arch: "arm", variant: "v5"},
	"armv5tejl": {arch: "arm", variant: "v5"},
	"armel":     {arch: "arm", variant: "v5"},
	"arm32v5":   {arch: "arm", variant: "v5"},
	"armv6l":    {arch: "arm", variant: "v6"},
	"arm32v6":   {arch: "arm", variant: "v6"},
	"armv7l":    {arch: "arm", variant: "v7"},
	"armv7":     {arch: "arm", variant: "v7"},
	"armhf":     {arch: "arm", variant: "v7"},
	"arm32v7":   {arch: "arm", variant: "v7"},
	"armv8l":    {arch: "arm", variant: "v8"},

	// Little-endian names from Debian and uname.
	"ppc64el":     {arch: "ppc64le"},
	"mips64el":    {arch: "mips64le"},
	"mipsel":      {arch: "mipsle"},
	"loongarch64": {arch: "loong64"},
}

// KnownArchitectures returns the architecture names Parse accepts (Go's GOARCH values), most
// used in container images first. The slice is the caller's to keep or change.
func KnownArchitectures() []string {
	names := make([]string, len(architectures))
	for i, a := range architectures {
		names[i] = a.name
	}
	return names
}

func lookupArch(name string) (architecture, bool) {
	for _, a := range architectures {
		if a.name == name {
			return a, true
		}
	}
	return architecture{}, false
}

func oneOf(names []string) string {
	return strings.Join(names, ", ")
}
