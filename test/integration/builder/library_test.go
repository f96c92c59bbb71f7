package builder_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/platform"
)

// mountsUnder returns the mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir) {
			out = append(out, f[1])
		}
	}
	return out
}

// TestLibraryInProcess uses package image (pkg/build/builder/image) in the
// test process, as the builder does: a build and a failing build, with
// TARGET* args, then Close leaves nothing mounted in the work directory.
func TestLibraryInProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	work := t.TempDir()
	b, err := image.New(image.Config{WorkDir: work})
	g.Expect(err).NotTo(HaveOccurred())
	closed := false
	defer func() {
		if !closed {
			_ = b.Close()
		}
	}()
	arm64, _ := platform.Parse("linux/arm64")
	ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\nARG TARGETPLATFORM\nARG TARGETARCH\nARG GREETING\n"+
		"RUN echo \"$GREETING $TARGETPLATFORM $TARGETARCH $(uname -m)\" > /out\n")
	var log strings.Builder
	dest := theBed.Registry.Host + "/it/library:arm64"
	out, err := b.BuildAndPush(ctx, image.Request{
		ContextDir: ctxDir, Platform: arm64, Args: map[string]string{"GREETING": "hi"},
		Labels: map[string]string{"team": "blue"}, Out: &log,
	}, dest, noAuth)
	g.Expect(err).NotTo(HaveOccurred(), log.String())
	g.Expect(out.Image.Platform.Architecture).To(Equal("arm64"))
	g.Expect(out.Image.Digest).To(Equal(out.Pushed.Digest))
	g.Expect(log.String()).To(ContainSubstring("STEP 4/6: ARG GREETING"))

	img, err := theBed.Registry.OpenImage(ctx, dest)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	got, err := img.TopLayerFile(ctx, digestOf(out.Image.Digest), "/out")
	g.Expect(err).NotTo(HaveOccurred())
	// Asked for linux/arm64, buildah says linux/arm64 too (as buildkit).
	g.Expect(strings.TrimSpace(got)).To(Equal("hi linux/arm64 arm64 aarch64"))
	labels, err := img.Labels(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(labels).To(HaveKeyWithValue("team", "blue"))

	_, err = b.Build(ctx, image.Request{ContextDir: writeContext(t, "FROM "+theBed.BaseImage+"\nRUN exit 3\n"), Out: &log})
	g.Expect(err).To(MatchError(ContainSubstring("exit status 3")))
	g.Expect(mountsUnder(t, work)).NotTo(BeEmpty(), "the store has overlay mounts while open")

	g.Expect(b.Close()).To(Succeed())
	closed = true
	g.Expect(mountsUnder(t, work)).To(BeEmpty(), "Close unmounts everything")
}

// TestDisposableBuilder builds and pushes with a disposable builder, as a
// build pod does (with a layer cache, so that the output's push mounts the
// blobs the cache's pushes uploaded, which the blob info cache records):
// its blob info cache lives in memory-backed /dev/shm, not in the work
// directory, while the builder is open, and Close removes it; its
// containers are transient (their records in the run root). A kept
// builder keeps both in its work directory's store.
func TestDisposableBuilder(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	const cacheFile = "blob-info-cache-v1.sqlite"
	amd64, _ := platform.Parse("linux/amd64")
	ctxDir := writeContext(t, "FROM "+theBed.BaseImage+"\nCOPY a.txt /a.txt\nRUN cat /a.txt > /b.txt\n")
	g.Expect(os.WriteFile(filepath.Join(ctxDir, "a.txt"), []byte("a\n"), 0o644)).To(Succeed())
	cacheRepo, err := platform.CacheRepository(theBed.Registry.Host+"/it/disposable-cache", "linux/amd64")
	g.Expect(err).NotTo(HaveOccurred())
	for _, disposable := range []bool{true, false} {
		work := t.TempDir()
		b, err := image.New(image.Config{WorkDir: work, Disposable: disposable})
		g.Expect(err).NotTo(HaveOccurred())
		var log strings.Builder
		dest := fmt.Sprintf("%s/it/disposable:%t", theBed.Registry.Host, disposable)
		out, err := b.BuildAndPush(ctx, image.Request{
			ContextDir: ctxDir, Platform: amd64, NoCache: true,
			Cache: &image.Cache{Repository: cacheRepo}, Out: &log,
		}, dest, noAuth)
		if err != nil {
			_ = b.Close()
		}
		g.Expect(err).NotTo(HaveOccurred(), log.String())
		img, err := theBed.Registry.OpenImage(ctx, dest)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := img.TopLayerFile(ctx, digestOf(out.Image.Digest), "/b.txt")
		img.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal("a\n"))
		cacheDir := b.BlobInfoCacheDir()
		_, cacheErr := os.Stat(filepath.Join(cacheDir, cacheFile))
		_, volatileErr := os.Stat(filepath.Join(work, "storage", "run", "overlay-containers", "volatile-containers.json"))
		g.Expect(b.Close()).To(Succeed())
		g.Expect(cacheErr).NotTo(HaveOccurred(), "the blob info cache is where the builder says")
		_, dirErr := os.Stat(cacheDir)
		if disposable {
			g.Expect(cacheDir).To(HavePrefix("/dev/shm/"), "a disposable builder keeps its blob info cache in memory")
			g.Expect(dirErr).To(MatchError(os.ErrNotExist), "Close removes it")
			g.Expect(volatileErr).NotTo(HaveOccurred(), "its containers were transient")
		} else {
			g.Expect(cacheDir).To(HavePrefix(work), "a kept builder keeps its blob info cache in its work directory")
			g.Expect(dirErr).NotTo(HaveOccurred())
			g.Expect(volatileErr).To(MatchError(os.ErrNotExist), "its containers were not transient")
		}
	}
}
