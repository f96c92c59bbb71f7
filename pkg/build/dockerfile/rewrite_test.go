package dockerfile

import (
	"strings"
	"testing"
)

func TestReplaceLastFrom(t *testing.T) {
	tests := []struct {
		name, dockerfile, image, want, wantErr string
	}{
		{
			name:       "single stage",
			dockerfile: "FROM busybox\nRUN true\n",
			image:      "registry.example.com/base:1",
			want:       "FROM registry.example.com/base:1\nRUN true\n",
		},
		{
			name:       "only the last FROM, keeping its stage name and flags",
			dockerfile: "# build\nFROM golang AS build\nRUN go build\nFROM --platform=linux/amd64 alpine AS final\nCOPY --from=build /x /x\n",
			image:      "ubi9",
			want:       "# build\nFROM golang AS build\nRUN go build\nFROM --platform=linux/amd64 ubi9 AS final\nCOPY --from=build /x /x\n",
		},
		{
			name:       "a FROM continued over lines",
			dockerfile: "FROM \\\n  busybox\nRUN true",
			image:      "alpine",
			want:       "FROM alpine\nRUN true",
		},
		{
			name:       "no FROM",
			dockerfile: "RUN true\n",
			image:      "alpine",
			wantErr:    "no FROM",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			replaced, err := f.ReplaceLastFrom(tt.image)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := replaced.Content(); string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
