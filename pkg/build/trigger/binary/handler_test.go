package binary

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequestOf(t *testing.T) {
	for _, tc := range []struct {
		query, wantErr string
	}{
		{query: "asFile=app.jar&revision.commit=9f1c2e9b&revision.authorName=Ann&platforms=linux/amd64,linux/arm64&platformsAllowedToFail=linux/arm64&env=A=1&env=B=x%3Dy&buildArg=GO=1.26&noCache=true"},
		{query: "asFile=../x", wantErr: `asFile "../x" must be a file name`},
		{query: "asFile=a/b", wantErr: `asFile "a/b" must be a file name`},
		{query: "asFile=..", wantErr: `asFile ".." must be a file name`},
		{query: "env=NOVALUE", wantErr: `env "NOVALUE": use NAME=VALUE`},
		{query: "env==x", wantErr: `env "=x": use NAME=VALUE`},
		{query: "buildArg=GO", wantErr: `buildArg "GO": use NAME=VALUE`},
		{query: "noCache=yes", wantErr: `noCache "yes": use true or false`},
	} {
		req, err := requestOf(httptest.NewRequest("POST", "/x?"+tc.query, nil))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want %s", tc.query, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		if req.Binary.AsFile != "app.jar" || req.Revision.Git.Commit != "9f1c2e9b" || req.Revision.Git.Author.Name != "Ann" ||
			strings.Join(req.Platforms, " ") != "linux/amd64 linux/arm64" || strings.Join(req.PlatformsAllowedToFail, " ") != "linux/arm64" ||
			len(req.Env) != 2 || req.Env[1].Value != "x=y" ||
			len(req.BuildArgs) != 1 || req.BuildArgs[0].Value != "1.26" || req.NoCache == nil || !*req.NoCache || req.TriggeredBy[0].Message != "Manually triggered" {
			t.Errorf("%s: %+v", tc.query, req)
		}
	}
}
