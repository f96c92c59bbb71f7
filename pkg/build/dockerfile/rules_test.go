package dockerfile

import (
	"reflect"
	"slices"
	"testing"

	"github.com/openshift/imagebuilder"
)

// TestRules is the table of buildah's rules that review rounds found the
// readers of a Dockerfile getting wrong, each read from the one model by
// every reader: the builder's keys and base checks (Images with buildah's
// lexer, Keyable), and build-controller's preflight (Images with Literal,
// Needed). A row says what each must tell.
func TestRules(t *testing.T) {
	args := map[string]string{"TARGETARCH": "arm64", "TARGETOS": "linux", "TARGETPLATFORM": "linux/arm64",
		"BUILDPLATFORM": "linux/amd64", "BUILDOS": "linux", "BUILDARCH": "amd64"}
	for _, tc := range []struct {
		rule       string
		dockerfile string
		// bases are the images the builder checks and keys for the target
		// platform; platformed those of FROMs with their own platform.
		bases, platformed []string
		// others are the other images the build pulls (no key names them).
		others []string
		// unkeyed: Images cannot tell what buildah pulls; keyable: the
		// Dockerfile reads nothing a key cannot see.
		unkeyed, keyable bool
		// preflight are the bases of the stages the last one needs, as
		// build-controller tells them without expanding.
		preflight []string
	}{
		{rule: "stage names are matched exactly: another case names an image",
			dockerfile: "FROM golang:1.22 AS Golang\nFROM alpine\nCOPY --from=golang /go /go\n",
			bases:      []string{"golang:1.22", "alpine"}, others: []string{"golang"}, unkeyed: true, keyable: false,
			preflight: []string{"alpine"}},
		{rule: "a stage is named only after it is declared",
			dockerfile: "FROM base\nCOPY --from=later /x /x\nFROM other AS later\n",
			bases:      []string{"base", "other"}, others: []string{"later"}, unkeyed: true, keyable: false,
			preflight: []string{"other"}},
		{rule: "a stage's own name in its instructions names an image",
			dockerfile: "FROM golang:1.22 AS golang\nRUN --mount=type=cache,from=golang,target=/x true\n",
			bases:      []string{"golang:1.22"}, others: []string{"golang"}, unkeyed: true, keyable: false,
			preflight: []string{"golang:1.22"}},
		{rule: "a stage index counts only as strconv.Itoa writes it",
			dockerfile: "FROM alpine\nFROM 00\nFROM 0\nCOPY --from=1 /x /x\n",
			bases:      []string{"alpine", "00"}, keyable: true,
			preflight: []string{"alpine", "00"}},
		{rule: "a name used twice names the last stage of that name",
			dockerfile: "FROM r/a:1 AS x\nFROM r/b:2 AS x\nFROM scratch\nCOPY --from=x /y /y\n",
			bases:      []string{"r/a:1", "r/b:2"}, keyable: true,
			preflight: []string{"r/b:2"}},
		{rule: "a FROM with its own platform is keyed for that platform, not checked for the target",
			dockerfile: "FROM --platform=$BUILDPLATFORM golang AS build\nFROM alpine\nCOPY --from=build /x /x\n",
			bases:      []string{"alpine"}, platformed: []string{"golang"}, keyable: true,
			preflight: []string{"alpine"}},
		{rule: "a declared BUILDPLATFORM is the ARG's, not buildah's",
			dockerfile: "ARG BUILDPLATFORM=linux/s390x\nFROM --platform=$BUILDPLATFORM golang AS b\nFROM alpine\n",
			bases:      []string{"alpine"}, others: []string{"golang"}, unkeyed: true, keyable: true,
			preflight: []string{"alpine"}},
		{rule: "arm without a variant is not told",
			dockerfile: "FROM --platform=linux/arm golang AS b\nFROM alpine\n",
			bases:      []string{"alpine"}, others: []string{"golang"}, unkeyed: true, keyable: true,
			preflight: []string{"alpine"}},
		{rule: "a global ARG default built from a platform or proxy arg is not told",
			dockerfile: "ARG B=reg.example/img${http_proxy}\nFROM alpine\n",
			bases:      []string{"alpine"}, unkeyed: true, keyable: true,
			preflight: []string{"alpine"}},
		{rule: "a --from value expands with its stage's ARGs only",
			dockerfile: "ARG T=tools\nFROM alpine\nCOPY --from=$T /x /x\n",
			bases:      []string{"alpine"}, unkeyed: true, keyable: false,
			preflight: []string{"alpine"}},
		{rule: "a flag buildah expands or unquotes may say anything",
			dockerfile: "FROM alpine\nRUN --mount=type=bind,fr\\\\om=img,target=/b cat /b/x\n",
			bases:      []string{"alpine"}, unkeyed: true, keyable: false,
			preflight: []string{"alpine"}},
		{rule: "an ADD source buildah expands may be a URL",
			dockerfile: "ARG URL\nFROM base\nADD $URL /fetched\n",
			bases:      []string{"base"}, keyable: false,
			preflight: []string{"base"}},
		{rule: "a secret mount is read and not keyed",
			dockerfile: "FROM base\nRUN --mount=type=secret,id=token make\n",
			bases:      []string{"base"}, keyable: false,
			preflight: []string{"base"}},
		{rule: "a cache mount seeded from an earlier stage is keyed",
			dockerfile: "FROM base AS Seed\nFROM base\nRUN --mount=type=cache,from=Seed,target=/c make\n",
			bases:      []string{"base"}, keyable: true,
			preflight: []string{"base"}},
		{rule: "ONBUILD runs in a later build: not keyed",
			dockerfile: "FROM base\nONBUILD RUN make\n",
			bases:      []string{"base"}, keyable: false,
			preflight: []string{"base"}},
		{rule: "stages the last does not need are not built",
			dockerfile: "FROM r/gpu:1 AS gpu\nFROM r/a:1 AS build\nFROM r/b:2\nCOPY --from=gpu / /\nFROM r/a:1\n",
			bases:      []string{"r/gpu:1", "r/a:1", "r/b:2"}, keyable: true,
			preflight: []string{"r/a:1"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			f, err := Parse([]byte(tc.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			im := f.Images(args, imagebuilder.ProcessWord)
			if got := refsOf(Unique(im.Bases())); !reflect.DeepEqual(got, tc.bases) {
				t.Errorf("bases %q, want %q", got, tc.bases)
			}
			if got := refsOf(Unique(im.PlatformBases())); !reflect.DeepEqual(got, tc.platformed) {
				t.Errorf("platformed bases %q, want %q", got, tc.platformed)
			}
			if !reflect.DeepEqual(im.Others, tc.others) {
				t.Errorf("others %q, want %q", im.Others, tc.others)
			}
			if im.Unkeyed() != tc.unkeyed {
				t.Errorf("unkeyed %v, want %v", im.Unkeyed(), tc.unkeyed)
			}
			if f.Keyable() != tc.keyable {
				t.Errorf("keyable %v, want %v", f.Keyable(), tc.keyable)
			}
			lit := f.Images(nil, Literal)
			needed := lit.Needed(len(lit.Stages) - 1)
			var preflight []string
			for _, b := range lit.Bases() {
				if needed[b.Stage] && !slices.Contains(preflight, b.Ref) {
					preflight = append(preflight, b.Ref)
				}
			}
			if !reflect.DeepEqual(preflight, tc.preflight) {
				t.Errorf("preflight bases %q, want %q", preflight, tc.preflight)
			}
		})
	}
}

// TestTargetStage finds --target's stage as buildah's ThroughTarget does:
// the last stage of that name, a stage without a name by its index, else
// the stage at that position.
func TestTargetStage(t *testing.T) {
	f, err := Parse([]byte("FROM a AS x\nFROM b AS 3\nFROM c AS x\nFROM d\nFROM e AS Y\n"))
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{
		"":   -1,
		"x":  2, // the last of that name
		"3":  3, // stage 3 has no name: buildah names it "3"
		"1":  1, // by position
		"01": 1, // a position as strconv.Atoi reads it
		"Y":  4,
		"y":  -1, // names are matched exactly
		"5":  -1,
		"-1": -1,
	} {
		if got := f.TargetStage(target); got != want {
			t.Errorf("TargetStage(%q) = %d, want %d", target, got, want)
		}
	}
}

// TestLiteral tells only words written out: build-controller reads no
// ARG, quote or escape, and no byte buildah's lexer would read otherwise.
func TestLiteral(t *testing.T) {
	for word, ok := range map[string]bool{
		"alpine:3.20": true, "reg.example/a@sha256:00": true,
		"$BASE": false, "a${V}": false, `"alpine"`: false, "'a'": false, `a\b`: false, "\xa5": false,
	} {
		got, err := Literal(word, []string{"BASE=x"})
		if (err == nil) != ok || (ok && got != word) {
			t.Errorf("Literal(%q) = %q, %v; want told %v", word, got, err, ok)
		}
	}
}

// TestInstructionVars lists the variables an instruction names, once
// each, whatever the instruction.
func TestInstructionVars(t *testing.T) {
	f, err := Parse([]byte("ARG A\nFROM $A\nENV V=${VERSION} W=$VERSION\nCOPY a ${DEST:-/d}/a\nRUN echo $GREETING\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, in := range f.Instructions {
		got = append(got, in.Vars)
	}
	want := [][]string{nil, {"A"}, {"VERSION"}, {"DEST"}, {"GREETING"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vars %q, want %q", got, want)
	}
}

// TestParseError says what is wrong with a Dockerfile the parser refuses.
func TestParseError(t *testing.T) {
	if _, err := Parse([]byte("FROM a\nRUN <<EOF\n")); err == nil {
		t.Error("a broken Dockerfile gave no error")
	}
}
