package s2i

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/archway-build/archway/pkg/build/builder/image"
)

const builderRef = "registry.example.com/s2i/builder@sha256:0123456789012345678901234567890123456789012345678901234567890123"

func builderImage(labels map[string]string, user string) image.PlatformImage {
	return image.PlatformImage{Reference: builderRef, Config: ocispec.ImageConfig{Labels: labels, User: user, WorkingDir: "/opt/app"}}
}

// writeSource writes files (path: content) into a new source directory on
// the same file system as the build context.
func writeSource(t *testing.T, root string, files map[string]string) string {
	t.Helper()
	src := filepath.Join(root, "source")
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	return src
}

func prepare(t *testing.T, files map[string]string, in Inputs) (Prepared, string, error) {
	t.Helper()
	root := t.TempDir()
	in.SourceDir = writeSource(t, root, files)
	in.Dir = filepath.Join(root, "s2i")
	p, err := Prepare(in)
	if err != nil {
		return p, "", err
	}
	df, err := os.ReadFile(p.Dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	return p, string(df), nil
}

// TestPrepareImageScripts: the scripts of the builder image's
// scripts-url label, the assemble user and destination of its labels, and
// the strategy's env after the source's .s2i/environment.
func TestPrepareImageScripts(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i", DestinationLabel: "/tmp", AssembleUserLabel: "1001"}
	p, df, err := prepare(t, map[string]string{
		"main.txt":         "hello",
		".s2i/environment": "GREETING=from-file\nLEVEL=1\n",
		".git/HEAD":        "ref: refs/heads/main\n",
		"lib/.git":         "gitdir: ../.git/modules/lib\n",
		"lib/a.txt":        "a",
	}, Inputs{Builder: builderImage(labels, "root"), Env: []string{"GREETING=from-strategy"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM " + builderRef + "\n",
		"COPY upload/src /tmp/src\n",
		"RUN chown -R 1001:0 /tmp/src\n",
		"USER 1001\n",
		"RUN /usr/libexec/s2i/assemble\n",
		"CMD /usr/libexec/s2i/run\n",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile has no %q:\n%s", want, df)
		}
	}
	// The strategy's value is set after the file's: it wins.
	file, strategy := strings.Index(df, `GREETING="from-file"`), strings.Index(df, `GREETING="from-strategy"`)
	if file < 0 || strategy < file {
		t.Errorf("the strategy's GREETING does not follow the file's:\n%s", df)
	}
	if p.AssembleUser != "1001" {
		t.Errorf("assemble user %q, want the label's 1001", p.AssembleUser)
	}
	for _, name := range []string{"main.txt", "lib/a.txt"} {
		if _, err := os.Stat(filepath.Join(p.ContextDir, "upload/src", name)); err != nil {
			t.Errorf("the source's %s is not in the build context: %v", name, err)
		}
	}
	// As source-to-image leaves them out of a source it downloads: a
	// clone's .git differs between clones and would change every key.
	for _, name := range []string{".git", "lib/.git"} {
		if _, err := os.Lstat(filepath.Join(p.ContextDir, "upload/src", name)); err == nil {
			t.Errorf("the source's %s is in the build context", name)
		}
	}
}

// TestPrepareSourceScripts: .s2i/bin scripts override the image's, and the
// image's config user assembles without an assemble-user label.
func TestPrepareSourceScripts(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i"}
	p, df, err := prepare(t, map[string]string{
		"main.txt":          "hello",
		".s2i/bin/assemble": "#!/bin/sh\necho override\n",
	}, Inputs{Builder: builderImage(labels, "2002")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(df, "RUN /tmp/scripts/assemble\n") || !strings.Contains(df, "COPY upload/scripts /tmp/scripts\n") {
		t.Errorf("the source's assemble is not the one run:\n%s", df)
	}
	if !strings.Contains(df, "CMD /usr/libexec/s2i/run\n") {
		t.Errorf("run is not the image's:\n%s", df)
	}
	if p.AssembleUser != "2002" || !strings.Contains(df, "USER 2002\n") {
		t.Errorf("assemble user %q, want the image's 2002:\n%s", p.AssembleUser, df)
	}
	got, err := os.ReadFile(filepath.Join(p.ContextDir, "upload/scripts/assemble"))
	if err != nil || !strings.Contains(string(got), "override") {
		t.Errorf("upload/scripts/assemble: %q, %v", got, err)
	}
}

// TestPrepareDeterministic: the same inputs give the same Dockerfile, its
// labels sorted (source-to-image writes them in map order), so result
// keys and the layer cache see one Dockerfile.
func TestPrepareDeterministic(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i", DestinationLabel: "/opt/s2i"}
	in := Inputs{Builder: builderImage(labels, ""), ScriptsURL: "image:///opt/scripts", Env: []string{"A=1", "B=2"}}
	var first string
	for i := range 8 {
		_, df, err := prepare(t, map[string]string{"main.txt": "x"}, in)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = df
			if !strings.Contains(df, "LABEL \"io.openshift.s2i.build.image\"=") {
				t.Fatalf("no sorted LABEL instruction:\n%s", df)
			}
			continue
		}
		if df != first {
			t.Fatalf("run %d wrote another Dockerfile:\n%s\nthan run 0:\n%s", i, df, first)
		}
	}
}

// TestPrepareRefuses: a scripts URL the pod must not read, and S2I files
// that are links (which could lead to the pod's secrets), are refused
// before source-to-image reads anything.
func TestPrepareRefuses(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("SECRET=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i"}
	for _, tc := range []struct {
		name    string
		scripts string
		link    string // a path in the source made a link to secret
		want    string
	}{
		{name: "file scripts", scripts: "file:///var/run/secrets/openshift.io/push", want: `scheme "file" is not supported`},
		{name: "relative image scripts", scripts: "image://usr/libexec", want: "names no absolute directory"},
		{name: "environment link", link: ".s2i/environment", want: ".s2i/environment is not a regular file"},
		{name: "assemble link", link: ".s2i/bin/assemble", want: ".s2i/bin/assemble is not a regular file"},
		{name: "bin link", link: ".s2i/bin", want: ".s2i/bin is not a directory"},
		{name: "ignore link", link: ".s2iignore", want: ".s2iignore is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			src := writeSource(t, root, map[string]string{"main.txt": "x", ".s2i/.keep": ""})
			if tc.link != "" {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(src, tc.link)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(secret, filepath.Join(src, tc.link)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Prepare(Inputs{SourceDir: src, Dir: filepath.Join(root, "s2i"), Builder: builderImage(labels, ""), ScriptsURL: tc.scripts})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(root, "s2i", "Dockerfile")); err == nil {
				t.Error("a Dockerfile was written")
			}
		})
	}
}

func TestCheckScriptsURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"":                              true,
		"image:///usr/libexec/s2i":      true,
		"https://example.com/s2i/bin":   true,
		"http://example.com/s2i":        true,
		"file:///etc":                   false,
		"/usr/libexec/s2i":              false,
		"ftp://example.com/s2i":         false,
		"https:///no-host":              false,
		"image://relative/path/scripts": false,
	} {
		if err := CheckScriptsURL(raw); (err == nil) != ok {
			t.Errorf("CheckScriptsURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}
