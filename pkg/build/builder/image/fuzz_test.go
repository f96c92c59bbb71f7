package image

import (
	"bytes"
	"strings"
	"testing"

	"github.com/openshift/imagebuilder"
	"github.com/openshift/imagebuilder/dockerfile/parser"
)

// FuzzReplaceLastFrom: whatever the Dockerfile and the image, the rewrite
// never panics, and when it succeeds the result parses to the same
// instructions, the same FROMs but the last, and the last FROM pulls the
// image: the image cannot add an instruction or a flag.
func FuzzReplaceLastFrom(f *testing.F) {
	for _, s := range []struct{ dockerfile, image string }{
		{"FROM busybox\nRUN true\n", "registry.example.com/base:1"},
		{"# build\nFROM golang AS build\nRUN go build\nFROM --platform=linux/amd64 alpine AS final\nCOPY --from=build /x /x\n", "ubi9"},
		{"FROM \\\n  busybox\nRUN true", "alpine"},
		{"RUN true\n", "alpine"},
		{"FROM a\n", "alpine\nRUN touch /pwned"},
		{"FROM a\n", "alpine --platform=x"},
		{"# escape=`\nFROM a `\n b\n", "c"},
		{"FROM a\r\nFROM b\r\n", "c"},
		{"ARG X=1\nFROM ${X}\n", "c@sha256:0000000000000000000000000000000000000000000000000000000000000000"},
	} {
		f.Add(s.dockerfile, s.image)
	}
	f.Fuzz(func(t *testing.T, dockerfile, image string) {
		got, err := replaceLastFrom([]byte(dockerfile), image)
		if err != nil {
			return
		}
		before, err := imagebuilder.ParseDockerfile(bytes.NewReader([]byte(dockerfile)))
		if err != nil {
			t.Fatalf("the input parsed once but not twice: %v", err)
		}
		after, err := imagebuilder.ParseDockerfile(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("the rewrite of %q with %q does not parse: %v\n%s", dockerfile, image, err, got)
		}
		if len(after.Children) != len(before.Children) {
			t.Fatalf("the rewrite of %q with %q has %d instructions, want %d:\n%s", dockerfile, image, len(after.Children), len(before.Children), got)
		}
		var lastBefore, lastAfter *parser.Node
		for i, n := range before.Children {
			a := after.Children[i]
			if !strings.EqualFold(n.Value, a.Value) {
				t.Fatalf("instruction %d changed from %s to %s:\n%s", i, n.Value, a.Value, got)
			}
			if strings.EqualFold(n.Value, "from") {
				if lastBefore != nil && strings.Join(nodeWords(lastBefore), " ") != strings.Join(nodeWords(lastAfter), " ") {
					t.Fatalf("a FROM other than the last changed: %v -> %v", nodeWords(lastBefore), nodeWords(lastAfter))
				}
				lastBefore, lastAfter = n, a
			}
		}
		if w := nodeWords(lastAfter); len(w) < 1 || w[0] != image || len(lastAfter.Flags) != len(lastBefore.Flags) {
			t.Fatalf("the last FROM reads %v (flags %v), want image %q (flags %v)", w, lastAfter.Flags, image, lastBefore.Flags)
		}
	})
}
