package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Options are the inputs of Write.
type Options struct {
	Dir, License, Version, URL, Homepage string
}

// binaryPrefix starts every release binary's name: <prefix><os>_<arch>.
const binaryPrefix = "kubectl-archway_"

// semver is the version krew accepts: v and semantic versioning 2.0.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// The krew plugin manifest, krew.googlecontainertools.github.com/v1alpha2.
type (
	manifest struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Metadata   metadata `json:"metadata"`
		Spec       spec     `json:"spec"`
	}
	metadata struct {
		Name string `json:"name"`
	}
	spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats,omitempty"`
		Platforms        []platform `json:"platforms"`
	}
	platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		Sha256   string   `json:"sha256"`
		Files    []file   `json:"files"`
		Bin      string   `json:"bin"`
	}
	selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	file struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
)

const description = `Starts, follows, describes and cancels the multi-platform Builds and BuildConfigs
archway serves (OpenShift's build.openshift.io/v1 as CRDs, extended with
platforms), as oc start-build, oc logs, oc describe and oc cancel-build do on
OpenShift: one image per CPU architecture and a manifest list, followed per
platform. Also prunes the builds' layer caches.`

// archiveTime is the time of every archive entry: a fixed time keeps the
// archives, and so their sha256, the same for the same binaries.
var archiveTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Write packages each binary of opts.Dir and writes archway.yaml there; it
// returns the manifest's path. Nothing is written when an input is wrong.
func Write(opts Options) (string, error) {
	if !semver.MatchString(opts.Version) {
		return "", fmt.Errorf("version %q: krew needs vMAJOR.MINOR.PATCH (e.g. v0.1.0, v0.2.0-rc.1); give VERSION=v... to make plugin-release", opts.Version)
	}
	base, err := url.Parse(opts.URL)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return "", fmt.Errorf("url %q: give the https:// address the archives are downloaded from", opts.URL)
	}
	license, err := os.ReadFile(opts.License)
	if err != nil {
		return "", fmt.Errorf("the license: %w", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return "", err
	}
	type archive struct {
		name string
		data []byte
	}
	var archives []archive
	m := manifest{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin", Metadata: metadata{Name: "archway"},
		Spec: spec{
			Version: opts.Version, Homepage: opts.Homepage,
			ShortDescription: "Start and follow multi-architecture builds of archway's BuildConfigs",
			Description:      description,
			Caveats:          "archway must be installed on the cluster (kubectl archway version says whether it is).\n",
		},
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, binaryPrefix) || strings.HasSuffix(name, ".tar.gz") {
			continue
		}
		goos, goarch, err := platformOf(name)
		if err != nil {
			return "", err
		}
		binData, err := os.ReadFile(filepath.Join(opts.Dir, name))
		if err != nil {
			return "", err
		}
		bin := "kubectl-archway"
		if goos == "windows" {
			bin += ".exe"
		}
		data, err := tarGz([]tarFile{{bin, 0o755, binData}, {"LICENSE", 0o644, license}})
		if err != nil {
			return "", err
		}
		archiveName := strings.TrimSuffix(name, ".exe") + ".tar.gz"
		sum := sha256.Sum256(data)
		archives = append(archives, archive{archiveName, data})
		m.Spec.Platforms = append(m.Spec.Platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      base.JoinPath(archiveName).String(),
			Sha256:   hex.EncodeToString(sum[:]),
			Files:    []file{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      bin,
		})
	}
	if len(archives) == 0 {
		return "", fmt.Errorf("%s holds no %s<os>_<arch> binary: run the build first", opts.Dir, binaryPrefix)
	}
	slices.SortFunc(m.Spec.Platforms, func(a, b platform) int { return strings.Compare(a.URI, b.URI) })
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", err
	}
	for _, a := range archives {
		if err := os.WriteFile(filepath.Join(opts.Dir, a.name), a.data, 0o644); err != nil {
			return "", err
		}
	}
	path := filepath.Join(opts.Dir, "archway.yaml")
	return path, os.WriteFile(path, out, 0o644)
}

// platformOf reads kubectl-archway_<os>_<arch>[.exe].
func platformOf(name string) (goos, goarch string, err error) {
	rest := strings.TrimPrefix(name, binaryPrefix)
	exe := strings.HasSuffix(rest, ".exe")
	rest = strings.TrimSuffix(rest, ".exe")
	goos, goarch, ok := strings.Cut(rest, "_")
	if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "_") || exe != (goos == "windows") {
		return "", "", fmt.Errorf("%s is not a release binary's name, %s<os>_<arch> (.exe on windows)", name, binaryPrefix)
	}
	return goos, goarch, nil
}

type tarFile struct {
	name string
	mode int64
	data []byte
}

// tarGz is a gzipped tar of files, the same bytes for the same files.
func tarGz(files []tarFile) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: archiveTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	err = errors.Join(tw.Close(), gz.Close())
	return buf.Bytes(), err
}
