package manifestlist

import (
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestSameCommit(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	d := fakeDigest("1")
	tests := []struct {
		name      string
		included  []buildv1.BuildStatusPlatform
		gitSource bool
		want      string
		wantErr   []string
	}{
		{name: "one commit", gitSource: true, want: a,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(a).obj(), sp("linux/arm64").complete(d).commit(a).obj()}},
		{name: "one commit, no spec.revision to compare with", gitSource: true,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(a).obj(), sp("linux/arm64").complete(d).commit(a).obj()}},
		{name: "spec.revision an abbreviated hash", gitSource: true, want: a[:7],
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(a).obj(), sp("linux/arm64").complete(d).commit(a).obj()}},
		{name: "not a Git source: no commits", gitSource: false,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).obj(), sp("linux/arm64").complete(d).obj()}},
		{name: "two commits", gitSource: true, want: a,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(a).obj(), sp("linux/arm64").complete(d).commit(b).obj(),
				sp("linux/s390x").complete(d).commit(a).obj()},
			wantErr: []string{"built from different commits", "linux/amd64, linux/s390x: " + a, "linux/arm64: " + b, "no manifest list was pushed"}},
		{name: "one platform reports no commit", gitSource: true, want: a,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(a).obj(), sp("linux/arm64").complete(d).obj()},
			wantErr:  []string{"different commits", "linux/arm64: no commit"}},
		{name: "none reports a commit", gitSource: true,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).obj(), sp("linux/arm64").complete(d).obj()},
			wantErr:  []string{"report no commit", "linux/amd64, linux/arm64: no commit"}},
		{name: "one commit, not the recorded one", gitSource: true, want: a,
			included: []buildv1.BuildStatusPlatform{sp("linux/amd64").complete(d).commit(b).obj(), sp("linux/arm64").complete(d).commit(b).obj()},
			wantErr:  []string{"built from commit " + b + ", not the Build's spec.revision " + a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := SameCommit(tt.included, tt.gitSource, tt.want)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("SameCommit: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("SameCommit: no error, want one saying %q", tt.wantErr)
			}
			if r := asError(t, err).Reason; r != buildv1.StatusReasonManifestListFailed {
				t.Errorf("reason %s, want ManifestListFailed", r)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
