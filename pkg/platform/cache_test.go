package platform

import (
	"strings"
	"testing"
)

func TestCacheRepository(t *testing.T) {
	long := "registry.example.com/" + strings.Repeat("a", 230)
	for _, tc := range []struct {
		repository, platform string
		want, err            string
	}{
		{repository: "registry.example.com/team/app-cache", platform: "linux/arm64", want: "registry.example.com/team/app-cache-linux-arm64"},
		{repository: "registry.example.com/team/app-cache", platform: "linux/arm64/v8", want: "registry.example.com/team/app-cache-linux-arm64"},
		{repository: "registry.example.com/team/app-cache", platform: "linux/arm", want: "registry.example.com/team/app-cache-linux-arm-v7"},
		{repository: "registry.example.com/team/app-cache", platform: "linux/amd64/v1", want: "registry.example.com/team/app-cache-linux-amd64"},
		{repository: "registry.example.com/team/app-cache", platform: "linux/amd64/v2", want: "registry.example.com/team/app-cache-linux-amd64-v2"},
		{repository: "127.0.0.1:5000/app", platform: "linux/s390x", want: "127.0.0.1:5000/app-linux-s390x"},
		{repository: "app", platform: "linux/s390x", want: "docker.io/library/app-linux-s390x"},
		{repository: "registry.example.com/team/app:v1", platform: "linux/amd64", err: `cache repository "registry.example.com/team/app:v1" has a tag or digest: name the repository only (e.g. registry.example.com/team/app)`},
		{repository: "registry.example.com/team/App", platform: "linux/amd64", err: `cache repository "registry.example.com/team/App" is not a repository name`},
		{repository: "registry.example.com/team/app", platform: "linux/x86_64", err: `cache repository for registry.example.com/team/app: "linux/x86_64": architecture "x86_64"`},
		{repository: long, platform: "linux/amd64", err: "is too long: with the platform suffix it has 263 characters, a registry takes at most 255"},
	} {
		got, err := CacheRepository(tc.repository, tc.platform)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CacheRepository(%q, %q) = %q, %v; want error containing %q", tc.repository, tc.platform, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CacheRepository(%q, %q) = %q, %v; want %q", tc.repository, tc.platform, got, err, tc.want)
		}
	}
}

func TestOutputCacheRepository(t *testing.T) {
	for in, want := range map[string]string{
		"registry.example.com/team/app:v1": "registry.example.com/team/app-cache",
		"registry.example.com/team/app":    "registry.example.com/team/app-cache",
		"app":                              "docker.io/library/app-cache",
	} {
		if got, err := OutputCacheRepository(in); err != nil || got != want {
			t.Errorf("OutputCacheRepository(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := OutputCacheRepository("registry.example.com/team/app@sha256:" + strings.Repeat("0", 64)); err == nil {
		t.Error("an output by digest gave a cache repository")
	}
}
