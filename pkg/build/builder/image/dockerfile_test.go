package image

import (
	"errors"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/openshift/imagebuilder"

	"github.com/archway-build/archway/pkg/build/dockerfile"
	"github.com/archway-build/archway/pkg/platform"
)

func TestUlimitOption(t *testing.T) {
	if got := ulimitOption("nofile", 20000); got != "nofile=20000:20000" {
		t.Errorf("got %q", got)
	}
	if got := ulimitOption("nproc", ^uint64(0)); got != "nproc=-1:-1" {
		t.Errorf("got %q", got)
	}
}

func TestBaseImagePlatformErrorMessage(t *testing.T) {
	err := &BaseImagePlatformError{Image: "r/base:1", Platform: "linux/s390x", Available: []string{"linux/amd64", "linux/arm64/v8"}}
	want := "base image r/base:1 has no image for linux/s390x; it has linux/amd64, linux/arm64/v8"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start with %q", err.Error(), want)
	}
	single := &BaseImagePlatformError{Image: "r/base:1", Platform: "linux/arm64", Available: []string{"linux/amd64"}, Single: true}
	if !strings.Contains(single.Error(), "single-platform image for linux/amd64, not for linux/arm64") {
		t.Errorf("got %q", single.Error())
	}
}

func TestCheckPushedPlatform(t *testing.T) {
	arm64 := platform.Platform{OS: "linux", Architecture: "arm64"}
	tests := []struct {
		want platform.Platform
		have ocispec.Platform
		ok   bool
	}{
		{arm64, ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, true},
		{arm64, ocispec.Platform{OS: "linux", Architecture: "arm64"}, true},
		{arm64, ocispec.Platform{OS: "linux", Architecture: "amd64"}, false},
		{arm64, ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v9"}, false},
		{platform.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, ocispec.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}, false},
		{platform.Platform{OS: "linux", Architecture: "amd64"}, ocispec.Platform{OS: "windows", Architecture: "amd64"}, false},
	}
	for _, tt := range tests {
		err := CheckPushedPlatform(tt.want, Image{Reference: "r/app@sha256:x", Platform: tt.have})
		if (err == nil) != tt.ok {
			t.Errorf("CheckPushedPlatform(%s, %+v) = %v, want ok=%v", tt.want, tt.have, err, tt.ok)
		}
		var mismatch *PlatformMismatchError
		if err != nil && (!errors.As(err, &mismatch) || !strings.Contains(err.Error(), "not the target platform "+tt.want.String())) {
			t.Errorf("error %v does not say the target platform", err)
		}
	}
}

func TestPinBases(t *testing.T) {
	const d = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	const e = "sha256:0000000000000000000000000000000000000000000000000000000000000002"
	dockerfile := "ARG BASE=reg.example/base:v1\n" +
		"FROM $BASE AS build\nRUN make\n" +
		"FROM \\\n  reg.example/run:v2\nCOPY --from=build /out /out\n" +
		"FROM build AS test\n" +
		"FROM reg.example/base:v1\n" +
		"FROM scratch\n"
	got, err := pinBases(parsed(t, dockerfile, map[string]string{}, map[string]string{
		"reg.example/base:v1": d, "reg.example/run:v2": e,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := "ARG BASE=reg.example/base:v1\n" +
		"FROM reg.example/base@" + d + " AS build\nRUN make\n" +
		"FROM reg.example/run@" + e + "\nCOPY --from=build /out /out\n" +
		"FROM build AS test\n" +
		"FROM reg.example/base@" + d + "\n" +
		"FROM scratch\n"
	if string(got) != want {
		t.Errorf("pinned:\n%s\nwant:\n%s", got, want)
	}
}

// TestPinBasesPlatform pins a FROM with a --platform flag by its digest for
// that platform, and the same image without the flag by the target's.
func TestPinBasesPlatform(t *testing.T) {
	const d = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	const e = "sha256:0000000000000000000000000000000000000000000000000000000000000002"
	args := map[string]string{"TARGETPLATFORM": "linux/arm64", "BUILDPLATFORM": "linux/amd64"}
	dockerfile := "FROM --platform=$BUILDPLATFORM reg.example/go:1 AS build\nRUN make\nFROM reg.example/go:1\nCOPY --from=build /out /out\n"
	got, err := pinBases(parsed(t, dockerfile, args, map[string]string{
		pinKey("reg.example/go:1", "linux/amd64"): d, pinKey("reg.example/go:1", ""): e,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := "FROM --platform=$BUILDPLATFORM reg.example/go@" + d + " AS build\nRUN make\nFROM reg.example/go@" + e + "\nCOPY --from=build /out /out\n"
	if string(got) != want {
		t.Errorf("pinned:\n%s\nwant:\n%s", got, want)
	}
}

// parsed parses dockerfile and tells its images with args as the builder
// does, for pinBases with digests.
func parsed(t *testing.T, content string, args, digests map[string]string) (*dockerfile.File, dockerfile.Images, map[string]string) {
	t.Helper()
	df, err := dockerfile.Parse([]byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return df, df.Images(args, imagebuilder.ProcessWord), digests
}
