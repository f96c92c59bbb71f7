package plugin

import (
	"strings"
	"testing"
)

func TestResourceArg(t *testing.T) {
	both := []kind{kindBuild, kindBuildConfig}
	for _, tc := range []struct {
		arg      string
		allowed  []kind
		wantKind kind
		wantName string
		wantErr  string
	}{
		{arg: "app-1", allowed: both, wantKind: kindBuild, wantName: "app-1"},
		{arg: "build/app-1", allowed: both, wantKind: kindBuild, wantName: "app-1"},
		{arg: "builds.build.openshift.io/app-1", allowed: both, wantKind: kindBuild, wantName: "app-1"},
		{arg: "bc/app", allowed: both, wantKind: kindBuildConfig, wantName: "app"},
		{arg: "BuildConfig/app", allowed: both, wantKind: kindBuildConfig, wantName: "app"},
		{arg: "buildconfigs.build.openshift.io/app", allowed: both, wantKind: kindBuildConfig, wantName: "app"},
		{arg: "bc/app", allowed: []kind{kindBuild}, wantErr: `"bc/app": use build/NAME`},
		{arg: "pod/app-1", allowed: both, wantErr: `"pod" is not a kind this command takes: use build/NAME or bc/NAME`},
		{arg: "bc/", allowed: both, wantErr: `"bc/": use build/NAME or bc/NAME`},
		{arg: "bc/a/b", allowed: both, wantErr: `"bc/a/b": use build/NAME or bc/NAME`},
	} {
		k, name, err := resourceArg(tc.arg, kindBuild, tc.allowed...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want an error with %s", tc.arg, err, tc.wantErr)
			}
			continue
		}
		if err != nil || k != tc.wantKind || name != tc.wantName {
			t.Errorf("%s: %s %q %v; want %s %q", tc.arg, k, name, err, tc.wantKind, tc.wantName)
		}
	}
}
