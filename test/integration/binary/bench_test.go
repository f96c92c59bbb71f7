package binary

import (
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBinaryUpload uploads a random archive of ARCHWAY_BENCH_BINARY_MIB
// MiB (default 64) with kubectl archway start-build --from-archive into the
// bed's registry, each way the plugin can: "direct" to the endpoint's own
// address (--build-endpoint) and "apiserver" through the kube-apiserver to
// the aggregated API triggers.archway.dev (the default), with the same
// service-account token. It prints the throughput and the peak of the
// process's heap during the upload over the heap before it (the plugin and
// the endpoint run in this process): the upload is streamed, so the peak
// should not follow the size.
func BenchmarkBinaryUpload(b *testing.B) {
	mib := 64
	if v, err := strconv.Atoi(os.Getenv("ARCHWAY_BENCH_BINARY_MIB")); err == nil && v > 0 {
		mib = v
	}
	h := newHarness(b, "binary-bench")
	h.buildConfig("app", false)
	alice := h.user("alice", "archway:build-starter")
	archive := filepath.Join(b.TempDir(), "input.bin")
	f, err := os.Create(archive)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, int64(mib)<<20); err != nil {
		b.Fatal(err)
	}
	_ = f.Close()
	for _, way := range []struct {
		name   string
		upload func(kubeconfig string, args ...string) (string, error)
	}{{"direct", h.plugin}, {"apiserver", h.pluginViaAPIServer}} {
		b.Run(way.name, func(b *testing.B) {
			benchmarkUpload(b, mib, func() error {
				_, err := way.upload(alice, "start-build", "app", "--from-archive", archive)
				return err
			})
		})
	}
}

func benchmarkUpload(b *testing.B, mib int, upload func() error) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var peak atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		if err := upload(); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		close(stop)
		<-done
		growth := float64(peak.Load()) - float64(before.HeapInuse)
		b.Logf("upload of %d MiB: %v, %.1f MiB/s; heap peak %.1f MiB over %.1f MiB before",
			mib, took.Round(time.Millisecond), float64(mib)/took.Seconds(), growth/(1<<20), float64(before.HeapInuse)/(1<<20))
		b.ReportMetric(float64(mib)/took.Seconds(), "MiB/s")
		b.ReportMetric(growth/(1<<20), "heap-peak-MiB")
	}
}
