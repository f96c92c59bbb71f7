package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// release makes a directory of fake release binaries and a license.
func release(t *testing.T, names ...string) Options {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("binary of "+n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	license := filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(license, []byte("Apache License\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{Dir: dir, License: license, Version: "v0.3.0", URL: "https://github.com/archway-build/archway/releases/download/v0.3.0",
		Homepage: "https://github.com/archway-build/archway"}
}

// untar reads a .tar.gz into name -> (mode, content).
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out[hdr.Name] = strings.TrimPrefix(os.FileMode(hdr.Mode).String(), "-") + " " + string(body)
	}
}

// TestManifest: every binary is packaged with the license, and the
// manifest names each archive for its os and arch with its URL and
// sha256, the binary krew links (bin) among the files it copies, as krew
// needs them.
func TestManifest(t *testing.T) {
	opts := release(t, "kubectl-archway_linux_amd64", "kubectl-archway_darwin_arm64", "kubectl-archway_windows_amd64.exe", "SHA256SUMS")
	path, err := Write(opts)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "archway" ||
		m.Spec.Version != "v0.3.0" || m.Spec.ShortDescription == "" || m.Spec.Homepage == "" || len(m.Spec.Platforms) != 3 {
		t.Fatalf("manifest:\n%s", data)
	}
	for _, p := range m.Spec.Platforms {
		os, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		name := "kubectl-archway_" + os + "_" + arch + ".tar.gz"
		if p.URI != opts.URL+"/"+name {
			t.Errorf("%s/%s: uri %s", os, arch, p.URI)
		}
		archive, err := readFile(filepath.Join(opts.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(archive)
		if p.Sha256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: sha256 %s, the archive's is %x", name, p.Sha256, sum)
		}
		bin, src := "kubectl-archway", "kubectl-archway_"+os+"_"+arch
		if os == "windows" {
			bin, src = bin+".exe", src+".exe"
		}
		files := untar(t, archive)
		if p.Bin != bin || files[bin] != "rwxr-xr-x binary of "+src || files["LICENSE"] != "rw-r--r-- Apache License\n" || len(files) != 2 {
			t.Errorf("%s: bin %s, files %v", name, p.Bin, files)
		}
		if len(p.Files) != 2 || p.Files[0] != (file{From: bin, To: "."}) || p.Files[1] != (file{From: "LICENSE", To: "."}) {
			t.Errorf("%s: files %+v", name, p.Files)
		}
	}

	// The same binaries give the same archives.
	again := opts
	again.Dir = t.TempDir()
	for _, n := range []string{"kubectl-archway_linux_amd64", "kubectl-archway_darwin_arm64", "kubectl-archway_windows_amd64.exe"} {
		b, _ := readFile(filepath.Join(opts.Dir, n))
		if err := os.WriteFile(filepath.Join(again.Dir, n), b, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	path2, err := Write(again)
	if err != nil {
		t.Fatal(err)
	}
	if data2, _ := readFile(path2); !bytes.Equal(data, data2) {
		t.Errorf("two runs differ:\n%s\n%s", data, data2)
	}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

func TestManifestRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		files   []string
		wantErr string
	}{
		{"a git describe version", func(o *Options) { o.Version = "601fc2a-dirty" }, nil, `version "601fc2a-dirty": krew needs vMAJOR.MINOR.PATCH`},
		{"no v", func(o *Options) { o.Version = "0.3.0" }, nil, "krew needs vMAJOR.MINOR.PATCH"},
		{"plain http", func(o *Options) { o.URL = "http://example.com/x" }, nil, "give the https:// address"},
		{"no binaries", func(*Options) {}, []string{"SHA256SUMS"}, "holds no kubectl-archway_<os>_<arch> binary"},
		{"a windows binary without .exe", func(*Options) {}, []string{"kubectl-archway_windows_amd64"}, "is not a release binary's name"},
		{"no arch", func(*Options) {}, []string{"kubectl-archway_linux"}, "is not a release binary's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = []string{"kubectl-archway_linux_amd64"}
			}
			opts := release(t, files...)
			tc.change(&opts)
			if _, err := Write(opts); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v, want an error with %q", err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(opts.Dir, "archway.yaml")); err == nil {
				t.Error("archway.yaml was written")
			}
		})
	}
	if semver.MatchString("v0.1.0-3-gabc1234") != true || semver.MatchString("v1.2") {
		t.Error("semver: v0.1.0-3-gabc1234 (git describe after a tag) is a version, v1.2 is not")
	}
}
