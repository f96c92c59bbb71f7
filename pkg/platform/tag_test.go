package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestTag(t *testing.T) {
	long := strings.Repeat("a", 120)
	longer := strings.Repeat("a", 119) + "b"
	tests := []struct {
		name, output, platform string
		want                   string
		wantErr                string
	}{
		{name: "tag and platform", output: "registry.example.com/team/app:v1", platform: "linux/arm64",
			want: "registry.example.com/team/app:v1-linux-arm64"},
		{name: "implied variant is left out", output: "registry.example.com/team/app:v1", platform: "linux/arm64/v8",
			want: "registry.example.com/team/app:v1-linux-arm64"},
		{name: "arm spells its variant", output: "registry.example.com/team/app:v1", platform: "linux/arm",
			want: "registry.example.com/team/app:v1-linux-arm-v7"},
		{name: "amd64 level", output: "127.0.0.1:5000/app:dev", platform: "linux/amd64/v3",
			want: "127.0.0.1:5000/app:dev-linux-amd64-v3"},
		{name: "no tag means latest", output: "127.0.0.1:5000/team/app", platform: "linux/s390x",
			want: "127.0.0.1:5000/team/app:latest-linux-s390x"},
		{name: "docker hub short name written in full", output: "app:1", platform: "linux/ppc64le",
			want: "docker.io/library/app:1-linux-ppc64le"},
		{name: "long tag is shortened with a hash", output: "r.example.com/app:" + long, platform: "linux/arm64",
			want: "r.example.com/app:" + long[:128-len("-linux-arm64")-9] + "-" + hash8(long) + "-linux-arm64"},
		{name: "different long tags stay different", output: "r.example.com/app:" + longer, platform: "linux/arm64",
			want: "r.example.com/app:" + longer[:128-len("-linux-arm64")-9] + "-" + hash8(longer) + "-linux-arm64"},
		{name: "digest output", output: "r.example.com/app@sha256:" + strings.Repeat("0", 64), platform: "linux/amd64",
			wantErr: "names a digest"},
		{name: "tag and digest output", output: "r.example.com/app:v1@sha256:" + strings.Repeat("0", 64), platform: "linux/amd64",
			wantErr: "names a digest"},
		{name: "bad output", output: "R.example.com/App:v1", platform: "linux/amd64", wantErr: "not an image reference"},
		{name: "bad platform", output: "r.example.com/app:v1", platform: "linux/aarch64", wantErr: `use "arm64"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tag(tt.output, tt.platform)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Tag(%q, %q) = %q, %v; want error containing %q", tt.output, tt.platform, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Tag(%q, %q) = %q, %v; want %q", tt.output, tt.platform, got, err, tt.want)
			}
			if tag := got[strings.LastIndex(got, ":")+1:]; len(tag) > maxTagLength {
				t.Errorf("tag %q is %d characters, more than %d", tag, len(tag), maxTagLength)
			}
		})
	}
}

func TestTags(t *testing.T) {
	got, err := Tags("r.example.com/app:v1", []string{"linux/amd64", "linux/arm64/v8", "linux/arm64", "linux/s390x"})
	want := []string{"r.example.com/app:v1-linux-amd64", "r.example.com/app:v1-linux-arm64", "r.example.com/app:v1-linux-s390x"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("PlatformTags = %q, %v; want %q", got, err, want)
	}
	got, err = Tags("r.example.com/app:v1", []string{"linux/amd64", "linux/x86_64"})
	if err == nil || len(got) != 1 {
		t.Fatalf("PlatformTags with a bad platform = %q, %v; want the good tag and an error", got, err)
	}
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}
