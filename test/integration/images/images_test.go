// Package images tests `make images` on the bed: hack/images.sh
// cross-compiles build-controller, builder and emulation-setup for four
// platforms, builds the images from images/*/Containerfile with archway's
// own `builder build`, and pushes each as one index to the bed's registry;
// and `make release-manifests`, which pins those indexes by digest. The bases are
// the bed's multi-arch busybox (assembled from Debian's busybox-static
// packages, as no public registry is reachable); the test reads the indexes
// back from the registry and checks each platform's binary is for its
// architecture.
package images

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

var testBed *bed.Bed

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "images suite",
		// A real node runs the images (TestInstallOnRealNode).
		// No kwok nodes: the other architectures are built under emulation
		// on the real node (TestInstallOnRealNode).
		Bed: bed.Options{RealNode: true, Nodes: []bed.Node{}},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			testBed = s.Bed
			return nil, nil
		},
	}))
}

// platforms are what make images builds by default, with the ELF machine
// each one's binaries must be for.
var platforms = []struct {
	os, arch string
	machine  elf.Machine
	// qemu are the interpreters emulation-setup's image holds for the
	// platform: every other one make images keeps, but qemu-arm on arm64
	// (Debian registers none there).
	qemu []string
}{
	{"linux", "amd64", elf.EM_X86_64, []string{"aarch64", "arm", "ppc64le", "s390x", "riscv64"}},
	{"linux", "arm64", elf.EM_AARCH64, []string{"x86_64", "ppc64le", "s390x", "riscv64"}},
	{"linux", "ppc64le", elf.EM_PPC64, []string{"x86_64", "aarch64", "arm", "s390x", "riscv64"}},
	{"linux", "s390x", elf.EM_S390, []string{"x86_64", "aarch64", "arm", "ppc64le", "riscv64"}},
}

// TestMakeImages runs hack/images.sh (what make images runs) against the
// bed's registry and checks the three indexes: one image per platform, each
// with its platform's binary (read from the image's top layer), static,
// build-controller running as a non-root user, emulation-setup with
// qemu's static interpreters for the platform and their registration
// lines. It prints each image's size per platform, then runs make
// release-manifests' program on the pushed indexes (checkRelease).
func TestMakeImages(t *testing.T) {
	ctx := t.Context()
	registry := makeImages(t)

	for _, name := range releaseImages {
		ref := registry + "/" + name + ":test"
		img, err := testBed.Registry.OpenImage(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		index, _, err := img.Index(ctx)
		if err != nil {
			img.Close()
			t.Fatalf("%s: %v", ref, err)
		}
		var got []string
		for _, p := range platforms {
			i := slices.IndexFunc(index.Manifests, func(d ocispec.Descriptor) bool {
				return d.Platform != nil && d.Platform.OS == p.os && d.Platform.Architecture == p.arch
			})
			if i < 0 {
				t.Errorf("%s has no image for %s/%s", ref, p.os, p.arch)
				continue
			}
			d := index.Manifests[i].Digest
			got = append(got, p.os+"/"+p.arch)
			where := fmt.Sprintf("%s %s/%s", ref, p.os, p.arch)
			bin, err := img.TopLayerFile(ctx, d, "/usr/local/bin/"+name)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			checkStatic(t, where, "/usr/local/bin/"+name, bin, p.machine)
			if name == "emulation-setup" {
				for _, q := range p.qemu {
					conf, err := img.TopLayerFile(ctx, d, "/usr/lib/binfmt.d/qemu-"+q+".conf")
					if err != nil {
						t.Errorf("%s: %v", where, err)
						continue
					}
					if !strings.HasSuffix(strings.TrimSpace(conf), ":/usr/libexec/qemu-binfmt/"+q+"-binfmt-P:OPF") {
						t.Errorf("%s: qemu-%s.conf is %q, not the interpreter with flags OPF", where, q, conf)
					}
					interp, err := img.TopLayerFile(ctx, d, "/usr/bin/qemu-"+q+"-static")
					if err != nil {
						t.Errorf("%s: %v", where, err)
						continue
					}
					checkStatic(t, where, "/usr/bin/qemu-"+q+"-static", interp, p.machine)
				}
			}
			child, err := testBed.Registry.OpenImage(ctx, registry+"/"+name+"@"+d.String())
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := child.Config(ctx)
			child.Close()
			if err != nil {
				t.Fatal(err)
			}
			if name == "build-controller" && (cfg.Config.User == "" || strings.HasPrefix(cfg.Config.User, "0") || strings.HasPrefix(cfg.Config.User, "root")) {
				t.Errorf("%s %s/%s runs as user %q, not a non-root uid", ref, p.os, p.arch, cfg.Config.User)
			}
			if want := "/usr/local/bin/" + name; !slices.Equal(cfg.Config.Entrypoint, []string{want}) {
				t.Errorf("%s %s/%s: entrypoint %q, want [%s]", ref, p.os, p.arch, cfg.Config.Entrypoint, want)
			}
			total, top, err := sizes(ctx, registry+"/"+name+"@"+d.String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("image %-16s %-13s compressed %5.1f MiB (archway's layer %5.1f MiB), binary %5.1f MiB\n",
				name, p.os+"/"+p.arch, mib(total), mib(top), mib(int64(len(bin))))
		}
		img.Close()
		if len(got) != len(platforms) {
			t.Errorf("%s: platforms %v", ref, got)
		}
	}

	// make release-manifests REGISTRY=<the bed's> TAG=test
	release := filepath.Join(t.TempDir(), "release")
	if msg, err := runRelease(ctx, releaseManifestsProgram(t), registry, "test", release); err != nil {
		t.Fatalf("release-manifests: %v\n%s", err, msg)
	} else {
		t.Logf("release-manifests:\n%s", msg)
	}
	checkRelease(t, registry, "test", release)
}

// imagesRegistry is where makeImages pushes: <the bed's registry>/archway.
func imagesRegistry() string { return testBed.Registry.Host + "/archway" }

var (
	imagesOnce sync.Once
	imagesErr  error
)

// makeImages runs hack/images.sh (what make images runs) once for the
// suite, pushing build-controller, builder and emulation-setup with tag
// "test" to imagesRegistry, and returns that registry.
func makeImages(t *testing.T) string {
	t.Helper()
	imagesOnce.Do(func() {
		if os.Getuid() != 0 {
			imagesErr = errors.New("make images runs buildah's builds: run as root")
			return
		}
		cmd := exec.CommandContext(context.Background(), "bash", filepath.Join(bed.RepoRoot(), "hack", "images.sh"))
		cmd.Dir = bed.RepoRoot()
		cmd.Env = append(os.Environ(),
			"REGISTRY="+imagesRegistry(), "TAG=test", "IMAGES_OUT="+filepath.Join(testBed.Dir, "images-out"),
			"BUILD_CONTROLLER_BASE_IMAGE="+testBed.BaseImage,
			"BUILDER_BASE_IMAGE="+testBed.BaseImage,
			// busybox has no package manager: the base stands in for one
			// that has git, ssh and CA certificates.
			"BUILDER_INSTALL_PACKAGES=true",
			// The bed's registry speaks plain HTTP on the real node's
			// address, as in-cluster registries often do.
			"BUILDER_FLAGS=--insecure-registry="+testBed.Registry.Host,
		)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		start := time.Now()
		if err := cmd.Run(); err != nil {
			imagesErr = fmt.Errorf("hack/images.sh: %w\n%s", err, log.String())
			return
		}
		fmt.Printf("hack/images.sh took %s:\n%s", time.Since(start).Round(time.Second), log.String())
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return imagesRegistry()
}

// checkStatic checks that the file at path of an image (its content bin)
// is a static ELF executable for machine.
func checkStatic(t *testing.T, where, path, bin string, machine elf.Machine) {
	t.Helper()
	f, err := elf.NewFile(strings.NewReader(bin))
	if err != nil {
		t.Errorf("%s: %s is not ELF: %v", where, path, err)
		return
	}
	if f.Machine != machine {
		t.Errorf("%s: %s is for %s", where, path, f.Machine)
	}
	if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Errorf("%s: %s is dynamically linked: it would need the base's C library", where, path)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// sizes are the compressed size of an image's layers and config, and of
// its top layer.
func sizes(ctx context.Context, ref string) (total, top int64, err error) {
	r, err := docker.ParseReference("//" + ref)
	if err != nil {
		return 0, 0, err
	}
	src, err := r.NewImageSource(ctx, testBed.Registry.SystemContext())
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = src.Close() }()
	raw, mt, err := src.GetManifest(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	m, err := manifest.FromBlob(raw, mt)
	if err != nil {
		return 0, 0, err
	}
	layers := m.LayerInfos()
	for _, l := range layers {
		total += l.Size
	}
	total += m.ConfigInfo().Size
	if len(layers) > 0 {
		top = layers[len(layers)-1].Size
	}
	return total, top, nil
}
