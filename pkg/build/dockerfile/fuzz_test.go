package dockerfile

import (
	"bytes"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/openshift/imagebuilder"
	"github.com/openshift/imagebuilder/dockerfile/parser"
)

// nodeWords returns an instruction's arguments as the parser has them.
func nodeWords(node *parser.Node) []string {
	var words []string
	for n := node.Next; n != nil; n = n.Next {
		words = append(words, n.Value)
	}
	return words
}

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
		parsed, err := Parse([]byte(dockerfile))
		if err != nil {
			return
		}
		replaced, err := parsed.ReplaceLastFrom(image)
		if err != nil {
			return
		}
		got := replaced.Content()
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

// FuzzModel: whatever the Dockerfile and build arg, the model never
// panics, and when the Dockerfile parses, what it tells holds together:
// one stage per FROM, every stage a FROM, --from or from= names is an
// earlier one, each base is a reference the build reaches, what
// build-controller tells with Literal the builder tells alike with
// buildah's lexer, the context paths stay in the context, and pinning
// every FROM changes nothing but the FROMs' images.
func FuzzModel(f *testing.F) {
	for _, s := range []struct{ dockerfile, arg string }{
		{"FROM busybox\nRUN true\n", ""},
		{"ARG BASE=alpine\nFROM $BASE AS build\nRUN --mount=type=cache,target=/c make\nFROM build\nCOPY --from=build /x /x\n", "BASE=debian"},
		{"FROM --platform=$BUILDPLATFORM golang AS b\nFROM alpine\nCOPY --from=b /a /a\nRUN --mount=type=bind,from=0,source=/a,target=/b true\n", "TARGETARCH=arm64"},
		{"FROM a AS x\nFROM b AS x\nFROM x\nCOPY --from=1 /y /y\nADD https://example.com/f /f\n", ""},
		{"ARG T=tools\nFROM scratch\nARG T\nCOPY --from=$T /t /t\nCOPY <<EOF /d\nhello\nEOF\n", "T=other"},
		{"FROM \"alpine\"\nFROM 'a'\\\nb\nONBUILD RUN x\n", ""},
		{"# escape=`\nFROM a `\n AS b\nFROM b\n", ""},
	} {
		f.Add(s.dockerfile, s.arg)
	}
	f.Fuzz(func(t *testing.T, dockerfile, arg string) {
		file, err := Parse([]byte(dockerfile))
		if err != nil {
			return
		}
		froms := 0
		for i, in := range file.Instructions {
			if in.Command == "from" {
				if file.Stages[froms].From != i {
					t.Fatalf("stage %d begins at instruction %d, not its FROM %d", froms, file.Stages[froms].From, i)
				}
				froms++
			}
			if in.Stage != froms-1 {
				t.Fatalf("instruction %d (%s) is in stage %d, want %d", i, in.Command, in.Stage, froms-1)
			}
		}
		if froms != len(file.Stages) {
			t.Fatalf("%d FROMs, %d stages", froms, len(file.Stages))
		}
		name, value, _ := strings.Cut(arg, "=")
		args := map[string]string{name: value, "TARGETPLATFORM": "linux/arm64", "BUILDPLATFORM": "linux/amd64"}
		builder := file.Images(args, imagebuilder.ProcessWord)
		controller := file.Images(nil, Literal)
		for _, im := range []Images{builder, controller} {
			if len(im.Stages) != len(file.Stages) {
				t.Fatalf("%d stages told, %d in the file", len(im.Stages), len(file.Stages))
			}
			for i, s := range im.Stages {
				if s.FromStage >= i || slices.ContainsFunc(s.Needs, func(n int) bool { return n < 0 || n >= i }) {
					t.Fatalf("stage %d names a stage not before it: from %d, needs %v", i, s.FromStage, s.Needs)
				}
				if s.Ref != "" && (!s.Told || s.FromStage >= 0) {
					t.Fatalf("stage %d pulls %q, told %v, from stage %d", i, s.Ref, s.Told, s.FromStage)
				}
			}
			refs := im.Refs()
			for _, b := range slices.Concat(im.Bases(), im.PlatformBases()) {
				if b.Ref == "" || !slices.Contains(refs, b.Ref) {
					t.Fatalf("base %+v is not among the references %q", b, refs)
				}
			}
			if needed := im.Needed(len(im.Stages) - 1); len(needed) > 0 && !needed[len(needed)-1] {
				t.Fatal("the last stage is not needed by itself")
			}
		}
		// What the controller tells without expanding, the builder tells
		// alike: a word written out reads the same to buildah's lexer.
		plain := file.Images(nil, imagebuilder.ProcessWord)
		for i, s := range controller.Stages {
			if s.Told && (!plain.Stages[i].Told || plain.Stages[i].Ref != s.Ref || plain.Stages[i].FromStage != s.FromStage) {
				t.Fatalf("stage %d: Literal tells %+v, buildah's lexer %+v", i, s, plain.Stages[i])
			}
		}
		if paths, ok := file.ContextSources(); ok {
			for _, p := range paths {
				if p != path.Clean(p) || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
					t.Fatalf("context source %q leaves the context", p)
				}
			}
		}
		pins := map[int]string{}
		for i := range file.Stages {
			pins[i] = "reg.example/pinned@sha256:0000000000000000000000000000000000000000000000000000000000000001"
		}
		pinned, err := file.RewriteFroms(pins)
		if err != nil {
			return
		}
		again, err := Parse(pinned)
		if err != nil {
			t.Fatalf("the pinned Dockerfile does not parse: %v\n%s", err, pinned)
		}
		if len(again.Instructions) != len(file.Instructions) || len(again.Stages) != len(file.Stages) {
			t.Fatalf("pinning changed the instructions:\n%s\n->\n%s", dockerfile, pinned)
		}
		for i, in := range file.Instructions {
			a := again.Instructions[i]
			if in.Command != a.Command || !reflect.DeepEqual(in.Flags, a.Flags) {
				t.Fatalf("pinning changed instruction %d: %+v -> %+v", i, in, a)
			}
			if in.Command != "from" && !reflect.DeepEqual(in.Args, a.Args) {
				t.Fatalf("pinning changed instruction %d's arguments: %q -> %q", i, in.Args, a.Args)
			}
		}
		for i, s := range again.Stages {
			if s.Image != pins[i] || s.Name != file.Stages[i].Name {
				t.Fatalf("stage %d reads %q AS %q after pinning, want %q AS %q", i, s.Image, s.Name, pins[i], file.Stages[i].Name)
			}
		}
	})
}
