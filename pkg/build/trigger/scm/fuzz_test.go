package scm

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// checkEvent holds for every parse: either a bad request, or an event whose
// revision (if any) is a hash and fits the limits.
func checkEvent(t *testing.T, ev *event, err error) {
	t.Helper()
	if err != nil {
		var bad *badRequest
		if !errors.As(err, &bad) {
			t.Fatalf("error that is not a bad request: %v", err)
		}
		return
	}
	if r := ev.revision; r != nil {
		if !commitPattern.MatchString(r.Commit) || len(r.Message) > maxMessage || len(r.Author.Name) > maxName ||
			len(r.Author.Email) > maxName || !utf8.ValidString(r.Message) {
			t.Fatalf("revision out of bounds: %+v", r)
		}
	}
	for _, e := range ev.env {
		if !envNamePattern.MatchString(e.Name) || e.ValueFrom != nil {
			t.Fatalf("env %+v let through", e)
		}
	}
}

func FuzzParseGitHub(f *testing.F) {
	f.Add("push", fixture(f, "github-push.json"))
	f.Add("ping", fixture(f, "github-ping.json"))
	f.Add("push", []byte(`{"ref":"refs/heads/main","deleted":true}`))
	f.Add("push", []byte(`{"ref":"x","head_commit":{"id":"-x"}}`))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		ev, err := parseGitHub(header("X-GitHub-Event", kind), body)
		checkEvent(t, ev, err)
	})
}

func FuzzParseGitLab(f *testing.F) {
	f.Add("Push Hook", fixture(f, "gitlab-push.json"))
	f.Add("Push Hook", []byte(`{"object_kind":"push","ref":"refs/heads/main","checkout_sha":null}`))
	f.Add("Tag Push Hook", []byte(`{}`))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		ev, err := parseGitLab(header("X-Gitlab-Event", kind), body)
		checkEvent(t, ev, err)
	})
}

func FuzzParseBitbucket(f *testing.F) {
	f.Add("repo:push", fixture(f, "bitbucket-push.json"), "main")
	f.Add("repo:push", []byte(`{"push":{"changes":[{"old":{"type":"branch","name":"main"},"new":null}]}}`), "main")
	f.Fuzz(func(t *testing.T, kind string, body []byte, branch string) {
		ev, err := parseBitbucket(header("X-Event-Key", kind), body, branch)
		checkEvent(t, ev, err)
	})
}

func FuzzParseGeneric(f *testing.F) {
	f.Add(fixture(f, "generic.json"))
	f.Add([]byte(``))
	f.Add([]byte(`{"env":[{"name":"A","valueFrom":{}}]}`))
	f.Add([]byte(`{"git":{"commit":"zz"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := parseGeneric(header(), body)
		checkEvent(t, ev, err)
	})
}
