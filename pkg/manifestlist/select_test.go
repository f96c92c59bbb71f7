package manifestlist

import (
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func platformsOf(ps []buildv1.BuildStatusPlatform) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Platform)
	}
	return strings.Join(names, ",")
}

func TestSelect(t *testing.T) {
	d := fakeDigest("a")
	tests := []struct {
		name          string
		platforms     []buildv1.BuildStatusPlatform
		allowedToFail []string
		wantIncluded  string
		wantSkipped   string
		wantReason    buildv1.StatusReason
		wantPlatform  string
		wantErr       []string
	}{
		{
			name: "all succeeded",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(), sp("linux/arm64").complete(d).obj(),
				sp("linux/ppc64le").complete(d).obj(), sp("linux/s390x").complete(d).obj(),
			},
			wantIncluded: "linux/amd64,linux/arm64,linux/ppc64le,linux/s390x",
		},
		{
			name: "allowed to fail failed",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(), sp("linux/s390x").failed(buildv1.StatusReasonDockerBuildFailed, "exit status 1").obj(),
			},
			allowedToFail: []string{"linux/s390x"},
			wantIncluded:  "linux/amd64", wantSkipped: "linux/s390x",
		},
		{
			name: "allowed to fail compared in canonical form",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(), sp("linux/arm64").phase(buildv1.BuildPhaseError).obj(),
				sp("linux/arm").phase(buildv1.BuildPhaseCancelled).obj(),
			},
			allowedToFail: []string{"linux/arm64/v8", "linux/arm/v7"},
			wantIncluded:  "linux/amd64", wantSkipped: "linux/arm64,linux/arm",
		},
		{
			name: "allowed to fail succeeded is included",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(), sp("linux/s390x").complete(d).obj(),
			},
			allowedToFail: []string{"linux/s390x"},
			wantIncluded:  "linux/amd64,linux/s390x",
		},
		{
			name: "required platform failed",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(),
				sp("linux/s390x").failed(buildv1.StatusReasonDockerBuildFailed, "RUN false: exit status 1\nmore").obj(),
			},
			wantReason: buildv1.StatusReasonPlatformBuildFailed, wantPlatform: "linux/s390x",
			wantErr: []string{"linux/s390x Failed (DockerBuildFailed: RUN false: exit status 1)", "a platform that is not allowed to fail did not succeed"},
		},
		{
			name: "required failures all named",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").phase(buildv1.BuildPhaseError).obj(),
				sp("linux/arm64").complete(d).obj(),
				sp("linux/s390x").failed(buildv1.StatusReasonPushImageToRegistryFailed, "").obj(),
				sp("linux/ppc64le").failed(buildv1.StatusReasonDockerBuildFailed, "").obj(),
			},
			allowedToFail: []string{"linux/ppc64le"},
			wantReason:    buildv1.StatusReasonPlatformBuildFailed, wantPlatform: "linux/amd64",
			wantErr: []string{"platforms that are not allowed to fail", "linux/amd64 Error", "linux/s390x Failed (PushImageToRegistryFailed)"},
		},
		{
			name: "every platform failed though allowed",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").failed(buildv1.StatusReasonDockerBuildFailed, "boom").obj(),
			},
			allowedToFail: []string{"linux/amd64"},
			wantReason:    buildv1.StatusReasonManifestListFailed,
			wantErr:       []string{"no platform succeeded", "linux/amd64 Failed (DockerBuildFailed: boom)"},
		},
		{
			name: "not finished",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/amd64").complete(d).obj(), sp("linux/arm64").phase(buildv1.BuildPhaseRunning).obj(), sp("linux/s390x").obj(),
			},
			wantReason: buildv1.StatusReasonManifestListFailed,
			wantErr:    []string{"linux/arm64 (Running)", "linux/s390x (not started)"},
		},
		{
			name:       "no platforms",
			wantReason: buildv1.StatusReasonManifestListFailed,
			wantErr:    []string{"no per-platform status entries"},
		},
		{
			name: "two spellings of one platform",
			platforms: []buildv1.BuildStatusPlatform{
				sp("linux/arm64").complete(d).obj(), sp("linux/arm64/v8").complete(d).obj(),
			},
			wantReason: buildv1.StatusReasonManifestListFailed, wantPlatform: "linux/arm64/v8",
			wantErr: []string{"same platform"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := Select(tt.platforms, tt.allowedToFail)
			if tt.wantReason != "" {
				if err == nil {
					t.Fatalf("Select = %+v, nil; want an error with reason %s", sel, tt.wantReason)
				}
				if got := ReasonOf(err); got != tt.wantReason {
					t.Errorf("reason = %s, want %s (%v)", got, tt.wantReason, err)
				}
				if e := asError(t, err); e.Platform != tt.wantPlatform {
					t.Errorf("platform = %q, want %q", e.Platform, tt.wantPlatform)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if got := platformsOf(sel.Included); got != tt.wantIncluded {
				t.Errorf("included = %s, want %s", got, tt.wantIncluded)
			}
			if got := platformsOf(sel.Skipped); got != tt.wantSkipped {
				t.Errorf("skipped = %s, want %s", got, tt.wantSkipped)
			}
		})
	}
}

func TestTerminal(t *testing.T) {
	d := fakeDigest("a")
	tests := []struct {
		name      string
		platforms []buildv1.BuildStatusPlatform
		want      []string
		terminal  bool
	}{
		{name: "no entries yet", want: []string{"linux/amd64"}},
		{name: "all terminal", terminal: true, platforms: []buildv1.BuildStatusPlatform{
			sp("linux/amd64").complete(d).obj(), sp("linux/arm64").phase(buildv1.BuildPhaseFailed).obj(),
			sp("linux/s390x").phase(buildv1.BuildPhaseCancelled).obj(), sp("linux/ppc64le").phase(buildv1.BuildPhaseError).obj(),
		}},
		{name: "one running", platforms: []buildv1.BuildStatusPlatform{
			sp("linux/amd64").complete(d).obj(), sp("linux/arm64").phase(buildv1.BuildPhaseRunning).obj(),
		}},
		{name: "one new", platforms: []buildv1.BuildStatusPlatform{
			sp("linux/amd64").complete(d).obj(), sp("linux/arm64").phase(buildv1.BuildPhaseNew).obj(),
		}},
		{name: "a wanted platform has no entry yet", want: []string{"linux/amd64", "linux/arm64"},
			platforms: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).obj()}},
		{name: "wanted platforms compared in canonical form", want: []string{"linux/amd64", "linux/arm64/v8"}, terminal: true,
			platforms: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).obj(), sp("linux/arm64").complete(d).obj()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Terminal(tt.platforms, tt.want); got != tt.terminal {
				t.Errorf("Terminal = %v, want %v", got, tt.terminal)
			}
		})
	}
}
