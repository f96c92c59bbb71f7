package manifestlist_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"testing"

	"github.com/archway-build/archway/pkg/manifestlist"
)

// BenchmarkManifestList measures the manifest-list step alone on the bed's
// local registry: reading four platforms' images, pushing their index and
// untagging the four per-platform tags, as `builder manifest-list` does
// once the platforms have finished. Goal: under 2 s. Pushing the
// per-platform images is left out of the timing.
//
//	go test -tags "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3" \
//	  -run '^$' -bench ManifestList -benchtime 20x ./test/integration/manifestlist/
func BenchmarkManifestList(b *testing.B) {
	ctx := context.Background()
	reg := theBed.Registry
	repo := "ml/bench"
	output := reg.Host + "/" + repo + ":v1"
	tags := platformTags(b, output, fourPlatforms)
	var assemble, untag, worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		digests := pushPlatforms(b, reg, output, fourPlatforms, pushOptions{})
		b.StartTimer()

		start := time.Now()
		if _, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: insecure}); err != nil {
			b.Fatal(err)
		}
		assembled := time.Now()
		if err := manifestlist.Untag(ctx, insecure, tags...); err != nil {
			b.Fatal(err)
		}
		done := time.Now()

		assemble += assembled.Sub(start)
		untag += done.Sub(assembled)
		worst = max(worst, done.Sub(start))
	}
	b.StopTimer()
	if got := tagsOf(b, reg, repo); !slices.Equal(got, []string{"v1"}) {
		b.Fatalf("tags %v after the benchmark, want only v1", got)
	}
	n := time.Duration(b.N)
	b.ReportMetric((assemble / n).Seconds(), "assemble-s/op")
	b.ReportMetric((untag / n).Seconds(), "untag-s/op")
	b.Logf("manifest-list step, 4 children, %d runs on %s: assemble+push %s, untag 4 tags %s, total %s per run (worst %s; goal < 2s)",
		b.N, reg.Host, (assemble / n).Round(time.Millisecond), (untag / n).Round(time.Millisecond),
		((assemble + untag) / n).Round(time.Millisecond), worst.Round(time.Millisecond))
}

// BenchmarkManifestListCommand measures `builder manifest-list` as the
// manifest-list pod runs it, once every platform has finished: process
// start, reading the Build from the apiserver, assembling and pushing the
// index of four images, recording its digest with server-side apply, and
// untagging. Building the binary and pushing the images are left out.
func BenchmarkManifestListCommand(b *testing.B) {
	if _, err := builderBinary(); err != nil {
		b.Fatal(err)
	}
	reg := theBed.Registry
	var total, worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		output := fmt.Sprintf("%s/ml/bench-command:v%d", reg.Host, i)
		build := createBuild(b, output, fourPlatforms, nil)
		digests := pushPlatforms(b, reg, output, fourPlatforms, pushOptions{})
		for _, p := range fourPlatforms {
			platformStatus{platform: p, phase: "Complete", digest: digests[p], output: output}.apply(b, build)
		}
		b.StartTimer()
		start := time.Now()
		out, err := runManifestListOnce(build)
		took := time.Since(start)
		if err != nil {
			b.Fatalf("builder manifest-list: %v\n%s", err, out)
		}
		total += took
		worst = max(worst, took)
	}
	b.StopTimer()
	b.Logf("builder manifest-list (process, apiserver, 4 children, status apply, untag), %d runs: %s per run (worst %s; goal < 2s)",
		b.N, (total / time.Duration(b.N)).Round(time.Millisecond), worst.Round(time.Millisecond))
}
