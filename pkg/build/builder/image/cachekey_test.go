package image

import (
	"testing"

	"github.com/archway-build/archway/pkg/build/dockerfile"
)

func TestCacheArgsDigest(t *testing.T) {
	const content = "ARG BASE\nFROM $BASE\nARG GREETING VERSION DEST\nRUN echo $GREETING\nENV VERSION=${VERSION}\nCOPY a $DEST/a\n"
	digest := func(args map[string]string) string {
		t.Helper()
		df, err := dockerfile.Parse([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		return cacheArgsDigest(df, args)
	}
	base := digest(map[string]string{"BASE": "a", "GREETING": "hi", "VERSION": "1", "DEST": "/d"})
	if base == "" {
		t.Fatal("args named by ENV and COPY gave no digest")
	}
	if got := digest(map[string]string{"BASE": "b", "GREETING": "hello", "VERSION": "1", "DEST": "/d"}); got != base {
		t.Errorf("args named only by FROM and RUN changed the digest: %s, want %s", got, base)
	}
	for name, args := range map[string]map[string]string{
		"ENV":  {"VERSION": "2", "DEST": "/d"},
		"COPY": {"VERSION": "1", "DEST": "/e"},
	} {
		if got := digest(args); got == base {
			t.Errorf("an arg named by %s changed and the digest did not", name)
		}
	}
	if got := digest(map[string]string{"GREETING": "hi"}); got != "" {
		t.Errorf("no arg named outside RUN and FROM, digest %q; want none", got)
	}
}
