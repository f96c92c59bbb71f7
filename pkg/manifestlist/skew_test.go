package manifestlist

import (
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestCheckRecorded(t *testing.T) {
	d := fakeDigest("b")
	tests := []struct {
		name       string
		platform   buildv1.BuildStatusPlatform
		wantReason buildv1.StatusReason
		wantErr    string
	}{
		{name: "digest and matching platform", platform: sp("linux/arm64").complete(d).recorded("linux", "arm64", "v8").obj()},
		{name: "digest and nothing recorded", platform: sp("linux/arm64").complete(d).obj()},
		{name: "arm variant recorded", platform: sp("linux/arm/v7").complete(d).recorded("linux", "arm", "v7").obj()},
		{name: "variant not recorded", platform: sp("linux/arm/v7").complete(d).recorded("linux", "arm", "").obj()},
		{name: "failed platforms are not checked", platform: sp("linux/arm64").failed(buildv1.StatusReasonDockerBuildFailed, "").obj()},
		{name: "complete without output", platform: sp("linux/arm64").complete("").obj(),
			wantReason: buildv1.StatusReasonPlatformVersionSkew, wantErr: "platform linux/arm64 is Complete but recorded no image digest"},
		{name: "complete with output but no digest", platform: sp("linux/s390x").complete("").recorded("linux", "s390x", "").obj(),
			wantReason: buildv1.StatusReasonPlatformVersionSkew, wantErr: "platform linux/s390x is Complete but recorded no image digest"},
		{name: "not a digest", platform: sp("linux/amd64").complete("sha256:abc").obj(),
			wantReason: buildv1.StatusReasonPlatformVersionSkew, wantErr: "not a digest"},
		{name: "built for the node's own architecture", platform: sp("linux/arm64").complete(d).recorded("linux", "amd64", "").obj(),
			wantReason: buildv1.StatusReasonPlatformVersionSkew, wantErr: "platform linux/arm64 was built for another platform: its builder recorded linux/amd64"},
		{name: "wrong variant", platform: sp("linux/arm/v7").complete(d).recorded("linux", "arm", "v6").obj(),
			wantReason: buildv1.StatusReasonPlatformVersionSkew, wantErr: "linux/arm/v6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRecorded(tt.platform)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("CheckRecorded: %v", err)
				}
				return
			}
			if err == nil || ReasonOf(err) != tt.wantReason || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckRecorded = %v (reason %s); want reason %s and %q", err, ReasonOf(err), tt.wantReason, tt.wantErr)
			}
			if e := asError(t, err); e.Platform != tt.platform.Platform {
				t.Errorf("error names platform %q, want %q", e.Platform, tt.platform.Platform)
			}
		})
	}
}

func TestEntries(t *testing.T) {
	d1, d2 := fakeDigest("1"), fakeDigest("2")
	got, err := Entries([]buildv1.BuildStatusPlatform{
		sp("linux/amd64").complete(d1).recorded("linux", "amd64", "").obj(),
		sp("linux/arm64").complete(d2).recorded("linux", "arm64", "v8").obj(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Digest != d1 || got[1].Digest != d2 || got[1].Recorded.Variant != "v8" || got[1].Platform != "linux/arm64" {
		t.Fatalf("Entries = %+v", got)
	}

	_, err = Entries([]buildv1.BuildStatusPlatform{
		sp("linux/amd64").complete(d1).obj(),
		sp("linux/arm64").complete("").obj(),
		sp("linux/s390x").complete(d2).recorded("linux", "amd64", "").obj(),
	})
	if err == nil || ReasonOf(err) != buildv1.StatusReasonPlatformVersionSkew ||
		!strings.Contains(err.Error(), "linux/arm64") || !strings.Contains(err.Error(), "linux/s390x") {
		t.Fatalf("Entries with two skewed platforms = %v; want both named, reason PlatformVersionSkew", err)
	}
}

func TestCheckChild(t *testing.T) {
	e := Entry{Platform: "linux/arm64", Digest: fakeDigest("c")}
	for _, tt := range []struct {
		config ocispec.Platform
		ok     bool
	}{
		{ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, true},
		{ocispec.Platform{OS: "linux", Architecture: "arm64"}, true},
		{ocispec.Platform{OS: "linux", Architecture: "amd64"}, false},
		{ocispec.Platform{OS: "windows", Architecture: "arm64"}, false},
		{ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v9"}, false},
		{ocispec.Platform{}, false},
	} {
		err := CheckChild(e, tt.config)
		if (err == nil) != tt.ok {
			t.Errorf("CheckChild(%+v) = %v, want ok=%v", tt.config, err, tt.ok)
		}
		if err != nil && (ReasonOf(err) != buildv1.StatusReasonPlatformVersionSkew || !strings.Contains(err.Error(), "its image config")) {
			t.Errorf("CheckChild(%+v) = %v (reason %s)", tt.config, err, ReasonOf(err))
		}
	}
}
