package dockerfile

import "testing"

func TestKeyableDockerfile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dockerfile string
		want       bool
	}{
		{"plain", "FROM base\nCOPY . /src\nRUN make\n", true},
		{"stage by name", "FROM base AS build\nRUN make\nFROM base\nCOPY --from=build /out /out\n", true},
		{"stage by index", "FROM base\nRUN make\nFROM base\nCOPY --from=0 /out /out\n", true},
		{"copy from an image", "FROM base\nCOPY --from=alpine:3 /etc/os-release /\n", false},
		{"stage named later", "FROM base\nCOPY --from=later /x /x\nFROM base AS later\n", false},
		{"add from a URL", "FROM base\nADD https://example.com/tool /tool\n", false},
		{"add from git", "FROM base\nADD git@github.com:a/b.git /src\n", false},
		{"cache mount", "FROM base\nRUN --mount=type=cache,target=/root/.cache,sharing=locked make\n", true},
		{"tmpfs mount", "FROM base\nRUN --mount=type=tmpfs,target=/tmp --mount=type=cache,target=/c make\n", true},
		{"cache mount seeded from a stage", "FROM base AS Seed\nFROM base\nRUN --mount=type=cache,from=Seed,target=/c make\n", true},
		{"cache mount seeded from an image named as a stage in another case", "FROM base AS seed\nFROM base\nRUN --mount=type=cache,from=Seed,target=/c make\n", false},
		{"copy from an image named as a stage in another case", "FROM base AS build\nFROM base\nCOPY --from=Build /x /x\n", false},
		{"cache mount seeded from an image", "FROM base\nRUN --mount=type=cache,from=alpine,target=/c make\n", false},
		{"bind mount of the context", "FROM base\nRUN --mount=type=bind,target=/src make\n", true},
		{"mount without a type binds", "FROM base\nRUN --mount=target=/src,source=go.mod make\n", true},
		{"bind mount of a stage", "FROM base AS b\nFROM base\nRUN --mount=type=bind,from=b,target=/b make\n", true},
		{"bind mount of an image", "FROM base\nRUN --mount=type=bind,from=alpine:3,target=/b make\n", false},
		{"secret mount", "FROM base\nRUN --mount=type=secret,id=token make\n", false},
		{"ssh mount", "FROM base\nRUN --mount=type=ssh make\n", false},
		{"one keyable and one not", "FROM base\nRUN --mount=type=cache,target=/c --mount=type=secret,id=x make\n", false},
		{"from another platform (keyed by its digest for that platform)", "FROM --platform=$BUILDPLATFORM base\nRUN make\n", true},
		{"onbuild", "FROM base\nONBUILD RUN make\n", false},
		{"ADD of a URL from an ARG", "ARG URL\nFROM base\nADD $URL /fetched\n", false},
		{"ADD of a quoted URL", "FROM base\nADD http:\"//\"h/f /fetched\n", false},
		{"COPY --from hidden behind an ARG", "ARG E\nFROM base\nCOPY --from$E=reg.example/src /f /f\n", false},
		{"COPY --from hidden behind an escape", "FROM base\nCOPY --from\\\\=reg.example/src /f /f\n", false},
		// buildah expands a RUN flag's ARGs and removes its quotes and
		// escapes before it reads it.
		{"a mount flag with an escape", "FROM base\nRUN --mount=type=bind,source=go.mod,s\\\\rc=secret.txt,target=/m cat /m\n", false},
		{"a mount flag with an ARG", "ARG S=src=secret.txt\nFROM base\nRUN --mount=type=bind,source=go.mod,$S,target=/m cat /m\n", false},
		{"a mount flag with quotes", "FROM base\nRUN --mount=type=bind,source='\"secret.txt\"',target=/m cat /m\n", false},
		{"a type hidden behind an escape", "FROM base\nRUN --mount=type=cache,source=secret.txt,target=/m,ty\\\\pe=bind cat /m\n", false},
		{"a whole flag from an ARG", "ARG X=mount=type=bind,from=img,target=/b\nFROM base\nRUN --$X cat /b/x\n", false},
		// buildah looks a name up among the earlier stages only.
		{"a mount from the stage's own name", "FROM base AS golang\nRUN --mount=type=cache,from=golang,target=/x true\n", false},
		{"a copy from the stage's own name", "FROM base AS tools\nCOPY --from=tools /x /y\n", false},
		{"a copy from the stage's own index", "FROM base\nFROM base\nCOPY --from=1 /x /y\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Keyable(); got != tc.want {
				t.Errorf("Keyable(%q) = %v, want %v", tc.dockerfile, got, tc.want)
			}
		})
	}
}
