package scm

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParsePushes(t *testing.T) {
	cases := []struct {
		name                     string
		parse                    func() (*event, error)
		ref, commit, author, msg string
	}{
		{"github push", func() (*event, error) {
			return parseGitHub(header("X-GitHub-Event", "push"), fixture(t, "github-push.json"))
		}, "refs/heads/main", "9f1c2e9b7c8d4a6f1e0b3c5d7a9e1f2b4c6d8e0a", "Mona Lisa", "Build for s390x too"},
		{"gitlab push: the checkout_sha's commit", func() (*event, error) {
			return parseGitLab(header("X-Gitlab-Event", "Push Hook"), fixture(t, "gitlab-push.json"))
		}, "refs/heads/main", "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "Jane Doe", "Pin the base image by digest"},
		{"bitbucket push", func() (*event, error) {
			return parseBitbucket(header("X-Event-Key", "repo:push"), fixture(t, "bitbucket-push.json"), "main")
		}, "main", "709d658dc5b6d6afcd46049c2f332ee3f515a67d", "Ada Lovelace", "Add a ppc64le test"},
		{"generic", func() (*event, error) {
			return parseGeneric(header(), fixture(t, "generic.json"))
		}, "main", "5f2a8b1c9d0e3f4a6b7c8d9e0f1a2b3c4d5e6f70", "Grace Hopper", "Release 1.4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := tc.parse()
			if err != nil {
				t.Fatal(err)
			}
			if ev.noBuild != "" || ev.ref != tc.ref || ev.revision == nil || ev.revision.Commit != tc.commit ||
				ev.revision.Author.Name != tc.author || !strings.HasPrefix(ev.revision.Message, tc.msg) {
				t.Errorf("event %+v, revision %+v", ev, ev.revision)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	push := string(fixture(t, "github-push.json"))
	cases := []struct {
		name    string
		parse   func() (*event, error)
		wantErr string // "" means no error
		noBuild string
	}{
		{"github ping", func() (*event, error) {
			return parseGitHub(header("X-GitHub-Event", "ping"), fixture(t, "github-ping.json"))
		}, "", "ping"},
		{"github unknown event", func() (*event, error) { return parseGitHub(header("X-GitHub-Event", "issues"), []byte("{}")) }, `unsupported GitHub event "issues"`, ""},
		{"github no event header", func() (*event, error) { return parseGitHub(header(), []byte("{}")) }, "missing X-GitHub-Event", ""},
		{"github malformed", func() (*event, error) { return parseGitHub(header("X-GitHub-Event", "push"), []byte(`{"ref": `)) }, "malformed JSON", ""},
		{"github wrong type", func() (*event, error) { return parseGitHub(header("X-GitHub-Event", "push"), []byte(`{"ref": 3}`)) }, `field "ref": expected string`, ""},
		{"github trailing data", func() (*event, error) { return parseGitHub(header("X-GitHub-Event", "push"), []byte(push+"{}")) }, "data after", ""},
		{"github deleted branch", func() (*event, error) {
			return parseGitHub(header("X-GitHub-Event", "push"), []byte(`{"ref":"refs/heads/main","deleted":true,"head_commit":null}`))
		}, "", "deleted"},
		{"github commit that is an option", func() (*event, error) {
			return parseGitHub(header("X-GitHub-Event", "push"), []byte(`{"ref":"refs/heads/main","head_commit":{"id":"--upload-pack=touch /tmp/x"}}`))
		}, "is not a Git commit hash", ""},
		{"gitlab tag push", func() (*event, error) { return parseGitLab(header("X-Gitlab-Event", "Tag Push Hook"), []byte("{}")) }, `unsupported GitLab event "Tag Push Hook"`, ""},
		{"gitlab deleted branch", func() (*event, error) {
			return parseGitLab(header("X-Gitlab-Event", "Push Hook"), []byte(`{"object_kind":"push","ref":"refs/heads/main","checkout_sha":null,"after":"0000000000000000000000000000000000000000"}`))
		}, "", "deleted"},
		{"bitbucket other event", func() (*event, error) {
			return parseBitbucket(header("X-Event-Key", "pullrequest:created"), []byte("{}"), "main")
		}, `unsupported Bitbucket event`, ""},
		{"bitbucket no changes", func() (*event, error) {
			return parseBitbucket(header("X-Event-Key", "repo:push"), []byte(`{"push":{"changes":[]}}`), "main")
		}, "without push.changes", ""},
		{"bitbucket tag only", func() (*event, error) {
			return parseBitbucket(header("X-Event-Key", "repo:push"), []byte(`{"push":{"changes":[{"new":{"type":"tag","name":"v1","target":{"hash":"709d658dc5b6d6afcd46049c2f332ee3f515a67d"}}}]}}`), "main")
		}, "", "no branch"},
		{"generic empty body builds", func() (*event, error) { return parseGeneric(header(), nil) }, "", ""},
		{"generic env name", func() (*event, error) { return parseGeneric(header(), []byte(`{"env":[{"name":"A=B","value":"x"}]}`)) }, "not a valid variable name", ""},
		{"generic env valueFrom", func() (*event, error) {
			return parseGeneric(header(), []byte(`{"env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"registry","key":"password"}}}]}`))
		}, "valueFrom is not allowed", ""},
		{"generic too many platforms", func() (*event, error) {
			return parseGeneric(header(), []byte(`{"platforms":["`+strings.Repeat(`linux/amd64","`, 17)+`linux/arm64"]}`))
		}, "at most 16 platforms", ""},
		{"generic not an object", func() (*event, error) { return parseGeneric(header(), []byte(`[1,2]`)) }, "malformed JSON", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := tc.parse()
			if tc.wantErr != "" {
				var bad *badRequest
				if !errors.As(err, &bad) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a bad request saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ev.noBuild, tc.noBuild) || (tc.noBuild == "") != (ev.noBuild == "") {
				t.Errorf("noBuild %q, want %q", ev.noBuild, tc.noBuild)
			}
		})
	}
}

func TestRevisionLimits(t *testing.T) {
	long := strings.Repeat("é", maxMessage)
	ev, err := parseGitHub(header("X-GitHub-Event", "push"),
		[]byte(`{"ref":"refs/heads/main","head_commit":{"id":"ABCDEF1","message":"`+long+`","author":{"name":"`+strings.Repeat("x", 1000)+`"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := ev.revision
	if len(r.Message) > maxMessage || len(r.Author.Name) > maxName || r.Commit != "abcdef1" {
		t.Errorf("message %d bytes, author %d bytes, commit %q", len(r.Message), len(r.Author.Name), r.Commit)
	}
	if !strings.HasSuffix(r.Message, "é") {
		t.Error("message cut inside a rune")
	}
}

func TestRefMatches(t *testing.T) {
	cases := []struct {
		pushed, configured string
		want               bool
	}{
		{"refs/heads/main", "main", true},
		{"main", "main", true},
		{"refs/heads/main", "refs/heads/main", true},
		{"refs/heads/dev", "main", false},
		{"refs/heads/master", "", true},
		{"refs/heads/main", "", false},
		{"refs/tags/main", "main", false},
	}
	for _, tc := range cases {
		if got := RefMatches(tc.pushed, tc.configured); got != tc.want {
			t.Errorf("RefMatches(%q, %q) = %v, want %v", tc.pushed, tc.configured, got, tc.want)
		}
	}
}
