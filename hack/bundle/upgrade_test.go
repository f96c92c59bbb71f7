package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/archway-build/archway/hack/releaselist"
)

// TestBundleUpgradeEdges generates the bundle of a release after the
// tree's hack/releases (v0.2.0, after v0.1.0) and checks that the CSV
// written carries OLM's upgrade edges (spec.replaces the previous
// release, olm.skipRange over every earlier one) and still passes the
// validation library; then that the catalog of
// docs/admin-guide/install.md gives each release the edges its CSV has.
func TestBundleUpgradeEdges(t *testing.T) {
	out, res := generatedAs(t, "v0.2.0")
	if _, err := Validate(out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "manifests", "archway.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	written := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(data, written); err != nil {
		t.Fatal(err)
	}
	skip := written.Annotations[operatorsv1alpha1.SkipRangeAnnotationKey]
	if written.Name != "archway.v0.2.0" || written.Spec.Version.String() != "0.2.0" ||
		written.Spec.Replaces != "archway.v0.1.0" || skip != ">=0.1.0 <0.2.0" {
		t.Errorf("CSV %s version %s replaces %q skipRange %q: want archway.v0.2.0 0.2.0 replaces archway.v0.1.0 skipRange >=0.1.0 <0.2.0",
			written.Name, written.Spec.Version, written.Spec.Replaces, skip)
	}
	// OLM reads the range with blang/semver: every earlier release is
	// in it, this one is not.
	in, err := semver.ParseRange(skip)
	if err != nil {
		t.Fatalf("olm.skipRange %q: %v", skip, err)
	}
	for v, want := range map[string]bool{"0.1.0": true, "0.1.5": true, "0.2.0-rc.1": true, "0.2.0": false, "0.0.9": false} {
		if in(semver.MustParse(v)) != want {
			t.Errorf("olm.skipRange %q holds %s: %v, want %v", skip, v, !want, want)
		}
	}
	if res.Bundle.CSV.Spec.Replaces != written.Spec.Replaces {
		t.Errorf("the bundle's CSV replaces %q, the file %q", res.Bundle.CSV.Spec.Replaces, written.Spec.Replaces)
	}

	entries := docChannel(t)
	if len(entries) < 2 {
		t.Fatalf("install.md's olm.channel has %d entries: want a release and one that updates from it", len(entries))
	}
	releases, err := releaselist.Read(filepath.Join(repo(t), "hack", "releases"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		v, err := semver.Parse(strings.TrimPrefix(e.Name, "archway.v"))
		if err != nil {
			t.Fatalf("install.md's channel entry %s: %v", e.Name, err)
		}
		meta := Meta{Package: "archway", Version: v}
		for _, r := range releaselist.Before(releases, v) {
			meta.Earlier = append(meta.Earlier, r.Version)
		}
		replaces, skipRange := upgradeEdges(meta)
		if e.Name == written.Name {
			replaces, skipRange = written.Spec.Replaces, skip
		}
		if e.Replaces != replaces || e.SkipRange != skipRange || len(e.Skips) > 0 {
			t.Errorf("install.md's channel entry %s: replaces %q skipRange %q skips %q; its CSV replaces %q skipRange %q",
				e.Name, e.Replaces, e.SkipRange, e.Skips, replaces, skipRange)
		}
	}
}

// channelEntry is an entry of a file-based catalog's olm.channel.
type channelEntry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces"`
	Skips     []string `json:"skips"`
	SkipRange string   `json:"skipRange"`
}

// docChannel reads the olm.channel of the catalog install.md builds: the
// here-document that holds "schema: olm.channel".
func docChannel(t *testing.T) []channelEntry {
	t.Helper()
	path := filepath.Join(repo(t), "docs", "admin-guide", "install.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "<<'YAML'\n")[1:] {
		doc, _, _ = strings.Cut(doc, "\nYAML\n")
		if !strings.Contains(doc, "schema: olm.channel") {
			continue
		}
		var ch struct {
			Schema  string         `json:"schema"`
			Package string         `json:"package"`
			Name    string         `json:"name"`
			Entries []channelEntry `json:"entries"`
		}
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &ch); err != nil {
			t.Fatalf("%s: the olm.channel: %v", path, err)
		}
		if ch.Package != "archway" || ch.Name != "alpha" {
			t.Errorf("%s: the olm.channel is %s of package %s: want alpha of archway (the bundle's)", path, ch.Name, ch.Package)
		}
		return ch.Entries
	}
	t.Fatalf("%s has no here-document (<<'YAML') with an olm.channel", path)
	return nil
}
