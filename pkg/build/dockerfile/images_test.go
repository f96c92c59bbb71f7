package dockerfile

import (
	"reflect"
	"testing"

	"github.com/openshift/imagebuilder"
)

// images parses dockerfile and tells its images with args, expanding as
// the builder does (with buildah's own lexer).
func images(t *testing.T, dockerfile string, args map[string]string) (*File, Images) {
	t.Helper()
	f, err := Parse([]byte(dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Images(args, imagebuilder.ProcessWord)
}

// refsOf returns the references of bases.
func refsOf(bases []Base) (out []string) {
	for _, b := range bases {
		out = append(out, b.Ref)
	}
	return out
}

func TestBaseImages(t *testing.T) {
	amd64 := map[string]string{"TARGETARCH": "amd64", "TARGETOS": "linux", "TARGETPLATFORM": "linux/amd64", "BUILDPLATFORM": "linux/amd64"}
	tests := []struct {
		name       string
		dockerfile string
		args       map[string]string
		want       []string
	}{
		{
			name:       "one FROM",
			dockerfile: "FROM busybox\nRUN true\n",
			want:       []string{"busybox"},
		},
		{
			name:       "scratch is no image",
			dockerfile: "FROM scratch\nCOPY a /\n",
			want:       nil,
		},
		{
			name:       "stage names are not images",
			dockerfile: "FROM golang:1.26 AS build\nRUN go build\nFROM build AS test\nFROM registry.example.com/base\nCOPY --from=build /x /x\n",
			want:       []string{"golang:1.26", "registry.example.com/base"},
		},
		{
			name:       "stage names are matched exactly, as buildah matches them",
			dockerfile: "FROM alpine as Builder\nFROM builder\nFROM Builder\n",
			want:       []string{"alpine", "builder"},
		},
		{
			name:       "a stage name counts only after it is declared",
			dockerfile: "FROM base\nFROM other AS base\n",
			want:       []string{"base", "other"},
		},
		{
			name:       "FROM with its own platform pulls for another platform",
			dockerfile: "FROM --platform=$BUILDPLATFORM golang AS build\nFROM alpine\n",
			args:       amd64,
			want:       []string{"alpine"},
		},
		{
			name:       "global ARG defaults are expanded",
			dockerfile: "ARG BASE=alpine\nARG TAG=3.20\nFROM ${BASE}:$TAG\n",
			want:       []string{"alpine:3.20"},
		},
		{
			name:       "build args override ARG defaults",
			dockerfile: "ARG BASE=alpine\nFROM $BASE\n",
			args:       map[string]string{"BASE": "debian"},
			want:       []string{"debian"},
		},
		{
			name:       "ARG defaults may use earlier ARGs",
			dockerfile: "ARG REG=r.example.com\nARG IMG=${REG}/base\nFROM $IMG\n",
			want:       []string{"r.example.com/base"},
		},
		{
			name:       "platform args need no ARG",
			dockerfile: "FROM base-$TARGETARCH\n",
			args:       amd64,
			want:       []string{"base-amd64"},
		},
		{
			name:       "an ARG without a value leaves the reference out",
			dockerfile: "ARG BASE\nFROM $BASE\n",
			want:       nil,
		},
		{
			name:       "default expansion syntax",
			dockerfile: "ARG V\nFROM alpine:${V:-latest}\n",
			want:       []string{"alpine:latest"},
		},
		{
			name:       "ARGs after the first FROM do not count for FROMs",
			dockerfile: "FROM a\nARG X=b\nFROM $X\n",
			want:       []string{"a"},
		},
		{
			name:       "duplicates once",
			dockerfile: "FROM alpine AS a\nFROM alpine AS b\n",
			want:       []string{"alpine"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, im := images(t, tt.dockerfile, tt.args)
			if refs := refsOf(Unique(im.Bases())); !reflect.DeepEqual(refs, tt.want) {
				t.Errorf("bases = %q, want %q", refs, tt.want)
			}
		})
	}
}

// TestRegistryRefs lists every image a build pulls, keyed or not, so that
// the registry settings cover each: FROMs with a --platform flag, COPY and
// ADD --from images, RUN --mount from= images; never a stage, by name or
// index.
func TestRegistryRefs(t *testing.T) {
	args := map[string]string{"TARGETARCH": "arm64", "TARGETOS": "linux", "TARGETPLATFORM": "linux/arm64", "BUILDPLATFORM": "linux/amd64"}
	tests := []struct {
		name, dockerfile string
		want             []string
	}{
		{
			name:       "a cross-compiling stage on the build platform",
			dockerfile: "FROM --platform=$BUILDPLATFORM localhost:5000/golang AS build\nRUN go build\nFROM scratch\nCOPY --from=build /app /app\n",
			want:       []string{"localhost:5000/golang"},
		},
		{
			name: "bases and images named by COPY, ADD and RUN --mount",
			dockerfile: "FROM alpine AS a\nFROM a\nCOPY --from=registry.example.com/tools:1 /t /t\nADD --chown=1 --from=127.0.0.1:5000/x /x /x\n" +
				"RUN --mount=type=bind,from=localhost:5000/assets,target=/a --mount=type=cache,target=/c true\n" +
				"RUN --mount=type=bind,from=a,target=/b true\nCOPY --from=0 /y /y\nCOPY --from=A /z /z\n",
			// A is no stage: buildah matches stage names exactly.
			want: []string{"127.0.0.1:5000/x", "A", "alpine", "localhost:5000/assets", "registry.example.com/tools:1"},
		},
		{
			name: "ARGs are expanded; references with unset ARGs are left out",
			dockerfile: "ARG TOOLS=registry.example.com/tools:2\nFROM scratch\nARG TOOLS\nARG MORE=localhost:5000/more\nCOPY --from=$TOOLS /t /t\nCOPY --from=$MORE /m /m\n" +
				"COPY --from=$UNSET /u /u\nFROM --platform=$BUILDPLATFORM $NOPE\nCOPY --from=$TOOLS /v /v\n",
			want: []string{"localhost:5000/more", "registry.example.com/tools:2"},
		},
		{
			name:       "an index past the stages is an image",
			dockerfile: "FROM scratch\nCOPY --from=1 /x /x\n",
			want:       []string{"1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, im := images(t, tt.dockerfile, args)
			if got := im.Refs(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Refs = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPlatformBaseImages lists the FROMs with a --platform flag of their
// own, each with its platform expanded and normalized; one whose platform
// or image cannot be told is left to the images no key sees.
func TestPlatformBaseImages(t *testing.T) {
	args := map[string]string{"TARGETARCH": "arm64", "TARGETOS": "linux", "TARGETPLATFORM": "linux/arm64", "BUILDPLATFORM": "linux/amd64"}
	dockerfile := "ARG GO=golang:1.26\n" +
		"FROM --platform=$BUILDPLATFORM $GO AS build\n" +
		"FROM --platform=${TARGETPLATFORM} alpine AS fetch\n" +
		"FROM --platform=linux/arm64/v8 alpine AS again\n" +
		"FROM --platform=$UNSET busybox AS unknown\n" +
		"FROM --platform=linux/foo busybox AS bad\n" +
		"FROM --platform=$BUILDPLATFORM build AS stage\n" +
		"FROM alpine\n"
	_, im := images(t, dockerfile, args)
	got := Unique(im.PlatformBases())
	want := []Base{
		{Ref: "golang:1.26", Line: 2, Platform: "linux/amd64", Stage: 0},
		{Ref: "alpine", Line: 3, Platform: "linux/arm64", Stage: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the platformed bases = %+v, want %+v", got, want)
	}
	if bases := Unique(im.Bases()); !reflect.DeepEqual(bases, []Base{{Ref: "alpine", Line: 8, Stage: 6}}) {
		t.Errorf("bases = %+v", bases)
	}
	if !reflect.DeepEqual(im.Others, []string{"busybox", "busybox"}) || im.Unknown {
		t.Errorf("others = %q, unknown %v; want both busybox FROMs", im.Others, im.Unknown)
	}
}

// TestDockerfileImagesUnkeyed lists Dockerfiles whose images this model
// cannot tell the way buildah tells them, or that pull images no key names:
// each must leave the build unkeyed, else a moved tag would reuse a stale
// image.
func TestDockerfileImagesUnkeyed(t *testing.T) {
	args := map[string]string{"TARGETARCH": "arm64", "TARGETOS": "linux", "TARGETPLATFORM": "linux/arm64",
		"BUILDPLATFORM": "linux/amd64", "BUILDOS": "linux", "BUILDARCH": "amd64"}
	for name, dockerfile := range map[string]string{
		"a stage name in another case is an image to buildah": "FROM golang:1.22 AS Golang\nFROM alpine\nCOPY --from=golang /usr/local/go /go\n",
		"a mount from a stage name in another case":           "FROM golang:1.22 AS Golang\nFROM alpine\nRUN --mount=type=cache,from=golang,target=/c true\n",
		"an ARG default built from platform args":             "ARG IMG=${BUILDARCH:+golang:1.22}\nFROM --platform=$BUILDPLATFORM $IMG AS b\nFROM $IMG\n",
		"a platform from an ARG":                              "ARG TARGETARCH\nARG P=linux/$TARGETARCH\nFROM --platform=$P golang AS b\nFROM alpine\n",
		"several --platform flags":                            "FROM --platform=linux/amd64 --platform=linux/s390x golang AS b\nFROM alpine\n",
		"a declared BUILDPLATFORM":                            "ARG BUILDPLATFORM=linux/s390x\nFROM --platform=$BUILDPLATFORM golang AS b\nFROM alpine\n",
		"arm without a variant":                               "FROM --platform=linux/arm golang AS b\nFROM alpine\n",
		"a stage name with an ARG":                            "ARG S=ubuntu\nFROM alpine AS $S\nFROM ubuntu\n",
		"a FROM with an unset ARG":                            "FROM $UNSET\n",
		"COPY --from an unset ARG":                            "FROM alpine\nCOPY --from=$UNSET /x /x\n",
		"COPY --from a global ARG not declared in the stage":  "ARG T=tools\nFROM alpine\nCOPY --from=$T /x /x\n",
		"a mount from the stage's own name":                   "FROM golang:1.22 AS golang\nRUN --mount=type=cache,from=golang,target=/x true\n",
		"a COPY --from hidden behind an ARG":                  "ARG E\nFROM alpine\nCOPY --from$E=reg.example/src:latest /f /f\n",
		"a COPY --from hidden behind an escape":               "FROM alpine\nCOPY --from\\\\=reg.example/src:latest /f /f\n",
		"a FROM flag with an ARG":                             "ARG E\nFROM --platform$E=linux/arm64 alpine\n",
		"an ARG default built from a proxy arg":               "ARG B=reg.example/img${http_proxy}\nFROM $B\n",
		"a RUN flag from an ARG":                              "ARG X=mount=type=bind,from=img,target=/b\nFROM alpine\nRUN --$X cat /b/x\n",
		"an escaped from= field":                              "FROM alpine\nRUN --mount=type=bind,fr\\\\om=img,target=/b cat /b/x\n",
	} {
		if _, im := images(t, dockerfile, args); !im.Unkeyed() {
			t.Errorf("%s: keyed: %+v", name, im)
		}
	}
	for name, dockerfile := range map[string]string{
		"a cross-compiling stage":              "FROM --platform=$BUILDPLATFORM golang AS build\nFROM alpine\nCOPY --from=build /x /x\n",
		"a platform written out, with variant": "FROM --platform=linux/arm/v7 golang AS b\nFROM --platform=${TARGETPLATFORM} alpine\n",
		"a stage by index and by exact name":   "FROM alpine AS Build\nFROM alpine\nCOPY --from=0 /x /x\nCOPY --from=Build /y /y\n",
		"scratch":                              "FROM scratch\nCOPY a /a\n",
	} {
		if _, im := images(t, dockerfile, args); im.Unkeyed() {
			t.Errorf("%s: unkeyed: %+v", name, im)
		}
	}
}

// TestStageIndexAsBuildahWritesIt keys "00" as the image it is to buildah,
// which matches a stage index only as strconv.Itoa writes it.
func TestStageIndexAsBuildahWritesIt(t *testing.T) {
	_, im := images(t, "FROM alpine\nFROM 00\nFROM 0\n", nil)
	if bases := Unique(im.Bases()); !reflect.DeepEqual(bases, []Base{{Ref: "alpine", Line: 1}, {Ref: "00", Line: 2, Stage: 1}}) {
		t.Errorf("bases = %+v", bases)
	}
}

// TestStagesUpTo leaves out the bases of the stages after a --target: they
// are not built.
func TestStagesUpTo(t *testing.T) {
	f, im := images(t, "FROM alpine AS base\nFROM golang AS build\nFROM base AS test\nFROM debian AS prod\n", nil)
	bases := Unique(im.Bases())
	for target, want := range map[string][]string{
		"":      {"alpine", "golang", "debian"},
		"base":  {"alpine"},
		"test":  {"alpine", "golang"},
		"prod":  {"alpine", "golang", "debian"},
		"nope":  {"alpine", "golang", "debian"},
		"Build": {"alpine", "golang", "debian"},
	} {
		if got := refsOf(UpTo(bases, f.TargetStage(target))); !reflect.DeepEqual(got, want) {
			t.Errorf("target %q: %q, want %q", target, got, want)
		}
	}
}
