package s2i

import (
	"errors"
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

// secretDir writes a Secret's keys as the kubelet mounts them: each key a
// link into a ..data directory.
func secretDir(t *testing.T, keys map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_29_12_00_00.1")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPrepareSecrets: each key of source.secrets is mounted for the
// assemble step alone, at destinationDir relative to the builder image's
// working directory (or absolute), owned by the assemble user; nothing of
// the Secrets is in the build context, and no other step mounts them.
func TestPrepareSecrets(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i", AssembleUserLabel: "1001"}
	creds := secretDir(t, map[string]string{"token": "s3cret", "user": "me"})
	ca := secretDir(t, map[string]string{"ca.crt": "PEM"})
	p, df, err := prepare(t, map[string]string{"main.txt": "hello"}, Inputs{
		Builder: builderImage(labels, ""),
		Secrets: []Input{{Name: "creds", Dir: creds, DestinationDir: "creds"}, {Name: "ca", Dir: ca, DestinationDir: "/etc/pki/app"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "RUN --mount=type=secret,id=s2i-secret-0,target=/opt/app/creds/token,required=true,uid=1001,gid=0,mode=0644 \\\n" +
		"    --mount=type=secret,id=s2i-secret-1,target=/opt/app/creds/user,required=true,uid=1001,gid=0,mode=0644 \\\n" +
		"    --mount=type=secret,id=s2i-secret-2,target=/etc/pki/app/ca.crt,required=true,uid=1001,gid=0,mode=0644 \\\n" +
		"    /usr/libexec/s2i/assemble\n"
	if !strings.Contains(df, want) {
		t.Errorf("the Dockerfile has no\n%s\nin:\n%s", want, df)
	}
	if n := strings.Count(df, "--mount"); n != 3 {
		t.Errorf("%d mounts, want the assemble step's 3:\n%s", n, df)
	}
	wantSecrets := []string{"id=s2i-secret-0,src=" + filepath.Join(creds, "token"), "id=s2i-secret-1,src=" + filepath.Join(creds, "user"),
		"id=s2i-secret-2,src=" + filepath.Join(ca, "ca.crt")}
	if strings.Join(p.Secrets, " ") != strings.Join(wantSecrets, " ") {
		t.Errorf("secrets %v, want %v", p.Secrets, wantSecrets)
	}
	if strings.Join(p.SecretFiles, " ") != "/etc/pki/app/ca.crt /opt/app/creds/token /opt/app/creds/user" {
		t.Errorf("secret files %v", p.SecretFiles)
	}
	err = filepath.WalkDir(p.ContextDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, rerr := os.ReadFile(path)
			if rerr == nil && strings.Contains(string(data), "s3cret") {
				t.Errorf("the build context's %s holds the secret", path)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrepareSecretsDefaults: no destinationDir is the working directory
// (source-to-image's /opt/app-root/src for an image without one); a user
// that is a name gets keys readable by all; a key two Secrets give is the
// later one's.
func TestPrepareSecretsDefaults(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i", AssembleUserLabel: "default"}
	a := secretDir(t, map[string]string{"token": "a"})
	b := secretDir(t, map[string]string{"token": "b"})
	img := builderImage(labels, "")
	img.Config.WorkingDir = ""
	p, df, err := prepare(t, map[string]string{"main.txt": "hello"}, Inputs{
		Builder: img, Secrets: []Input{{Name: "a", Dir: a}, {Name: "b", Dir: b, DestinationDir: "."}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "RUN --mount=type=secret,id=s2i-secret-0,target=/opt/app-root/src/token,required=true,uid=0,gid=0,mode=0644 \\\n"; !strings.Contains(df, want) {
		t.Errorf("the Dockerfile has no %q:\n%s", want, df)
	}
	if strings.Join(p.Secrets, " ") != "id=s2i-secret-0,src="+filepath.Join(b, "token") {
		t.Errorf("secrets %v, want b's token alone", p.Secrets)
	}
}

// TestPrepareSecretsRefused: a destinationDir leaving its directory, one a
// mount flag cannot hold, and a Secret that is not mounted are refused,
// saying which.
func TestPrepareSecretsRefused(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i"}
	dir := secretDir(t, map[string]string{"token": "x"})
	for _, tc := range []struct {
		secret Input
		want   string
	}{
		{Input{Name: "s", Dir: dir, DestinationDir: "../etc"}, `secret s: destinationDir "../etc" must not start with ".."`},
		{Input{Name: "s", Dir: dir, DestinationDir: "a,uid=0"}, `secret s: destinationDir "a,uid=0": with strategy Source it may hold only`},
		{Input{Name: "s", Dir: dir, DestinationDir: "my dir"}, `secret s: destinationDir "my dir"`},
		{Input{Name: "gone", Dir: filepath.Join(dir, "missing")}, "secret gone is not mounted at "},
	} {
		_, _, err := prepare(t, map[string]string{"main.txt": "x"}, Inputs{Builder: builderImage(labels, ""), Secrets: []Input{tc.secret}})
		var perr *Error
		if !errors.As(err, &perr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an *Error saying %q", tc.secret, err, tc.want)
		}
	}
}

// TestPrepareConfigMaps: as OpenShift's builder injects source.configMaps,
// their keys are copied into the image at destinationDir, relative to the
// working directory (or absolute), and given to the assemble user before
// assemble; unlike secrets, they stay.
func TestPrepareConfigMaps(t *testing.T) {
	labels := map[string]string{ScriptsURLLabel: "image:///usr/libexec/s2i", AssembleUserLabel: "1001"}
	settings := secretDir(t, map[string]string{"settings.xml": "<settings/>"})
	p, df, err := prepare(t, map[string]string{"main.txt": "hello"}, Inputs{
		Builder:    builderImage(labels, ""),
		ConfigMaps: []Input{{Name: "maven", Dir: settings, DestinationDir: ".m2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(filepath.Dir(p.ContextDir), "s2i.configmaps", "0")
	for _, want := range []string{
		"COPY upload/injections" + stage + " /opt/app/.m2\n",
		"RUN chown -R 1001:0 /tmp/src /opt/app/.m2\n",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile has no %q:\n%s", want, df)
		}
	}
	if strings.Contains(df, "rm ") {
		t.Errorf("the Dockerfile removes a ConfigMap's key:\n%s", df)
	}
	data, err := os.ReadFile(filepath.Join(p.ContextDir, "upload/injections", stage, "settings.xml"))
	if err != nil || string(data) != "<settings/>" {
		t.Errorf("the build context's copy of settings.xml: %q, %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(p.ContextDir, "upload/injections", stage, "..data")); err == nil {
		t.Error("the kubelet's ..data went into the build context")
	}
	_, _, err = prepare(t, map[string]string{"main.txt": "x"}, Inputs{Builder: builderImage(labels, ""),
		ConfigMaps: []Input{{Name: "maven", Dir: settings, DestinationDir: "../etc"}}})
	if err == nil || !strings.Contains(err.Error(), `configMap maven: destinationDir "../etc" must not start with ".."`) {
		t.Errorf("a destinationDir out of the working directory: %v", err)
	}
}
