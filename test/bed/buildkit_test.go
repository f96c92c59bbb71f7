package bed

import (
	"strings"
	"testing"
	"time"
)

// TestReadBuildKitProgress folds a rawjson stream as buildctl prints it:
// each vertex reported again as it changes, platform steps named
// "[platform n/m]" (with a stage name for multi-stage files), and the
// steps of no platform (context, metadata, export) left out of the spans.
func TestReadBuildKitProgress(t *testing.T) {
	stream := `{"vertexes":[{"digest":"sha256:a","name":"[linux/amd64 1/2] FROM base","started":"2026-01-01T00:00:00Z"}]}
{"vertexes":[{"digest":"sha256:a","name":"[linux/amd64 1/2] FROM base","started":"2026-01-01T00:00:00Z","completed":"2026-01-01T00:00:01Z"}]}
{"vertexes":[{"digest":"sha256:b","name":"[linux/amd64 2/2] RUN uname -m","started":"2026-01-01T00:00:01Z","completed":"2026-01-01T00:00:03Z"}]}
{"vertexes":[{"digest":"sha256:c","name":"[build linux/arm/v7 1/2] FROM base","started":"2026-01-01T00:00:00.5Z","completed":"2026-01-01T00:00:00.5Z","cached":true}]}
{"vertexes":[{"digest":"sha256:d","name":"[linux/amd64 internal] load metadata for base","started":"2025-12-31T23:59:00Z","completed":"2026-01-01T00:00:00Z"}]}
{"vertexes":[{"digest":"sha256:e","name":"exporting to image","started":"2026-01-01T00:00:03Z","completed":"2026-01-01T00:00:04.5Z"}]}
`
	res, err := readBuildKitProgress(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Platforms["linux/amd64"]; got != 3*time.Second {
		t.Errorf("linux/amd64 took %v, want 3s (its two steps, not its metadata lookup)", got)
	}
	if got, ok := res.Platforms["linux/arm/v7"]; !ok || got != 0 {
		t.Errorf("linux/arm/v7 = %v, %v; want 0, true (one cached step of a named stage)", got, ok)
	}
	if res.Steps != 1 || res.CachedSteps != 0 {
		t.Errorf("steps %d, cached %d; want 1, 0 (FROM left out)", res.Steps, res.CachedSteps)
	}
	if res.Export != 1500*time.Millisecond {
		t.Errorf("export %v, want 1.5s", res.Export)
	}
	if _, err := readBuildKitProgress(strings.NewReader("{not json")); err == nil {
		t.Error("a broken stream was read without an error")
	}
}
