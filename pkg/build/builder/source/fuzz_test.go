package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// FuzzCheckGitRef: whatever CheckGitRef accepts cannot be read by git as an
// option, nor hold what separates or escapes a refspec.
func FuzzCheckGitRef(f *testing.F) {
	for _, s := range []string{"", "main", "refs/heads/a/b", "v1.0", "0123abcd", "--upload-pack=touch x", "-b",
		"a b", "a:b", "a..b", "a@{1}", "a/", "a.lock", "HEAD~1", "\x00", "ref\n--upload-pack=x", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if CheckGitRef(ref) != nil {
			return
		}
		if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n\r\x00:") || strings.Contains(ref, "..") {
			t.Fatalf("CheckGitRef accepted %q", ref)
		}
	})
}

// FuzzCheckGitURI: whatever CheckGitURI accepts is no option, no remote
// helper and, unless local repositories are allowed, names an http(s),
// ssh or git URL or an scp-like ssh address; RedactURI never shows a
// password of the URL.
func FuzzCheckGitURI(f *testing.F) {
	for _, s := range []string{"https://github.com/org/app.git", "git@github.com:org/app.git", "ssh://git@h:22/a",
		"git://h/a", "file:///srv/a", "/srv/a", "./a", "-oProxyCommand=x", "--upload-pack=x", "ext::sh -c x",
		"fd::3", "https://ada:s3cret@h/a", "https://tok@h/a", "https://a:%zz@h/", "HTTPS://A:B@H/", "h:/a", ":a"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, uri string, allowFile bool) {
		if u, err := url.Parse(uri); err == nil && u.User != nil && urlScheme.MatchString(uri) {
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(RedactURI(uri), pw) && !strings.Contains(strings.Replace(uri, pw, "", 1), pw) {
				t.Fatalf("RedactURI(%q) = %q shows the password", uri, RedactURI(uri))
			}
		}
		if CheckGitURI(uri, allowFile) != nil {
			return
		}
		if strings.HasPrefix(uri, "-") || remoteHelper.MatchString(uri) || strings.ContainsFunc(uri, isControlOrSpace) {
			t.Fatalf("CheckGitURI(%q, %v) accepted an option, a remote helper or control characters", uri, allowFile)
		}
		if !allowFile {
			m := urlScheme.FindStringSubmatch(uri)
			if m == nil && !isSCPLike(uri) || m != nil && strings.EqualFold(m[1], "file") {
				t.Fatalf("CheckGitURI(%q, false) accepted a local repository", uri)
			}
		}
	})
}

// FuzzEntryName: a name entryName accepts is local to the directory.
func FuzzEntryName(f *testing.F) {
	for _, s := range []string{"a", "./a", "/a", "../a", "a/../../b", `..\a`, "a/./b/", "", ".", "//", "a\x00b", "C:/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rel, ok, err := entryName(name)
		if err != nil || !ok {
			return
		}
		if !filepath.IsLocal(rel) || strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") {
			t.Fatalf("entryName(%q) = %q, which leaves the directory", name, rel)
		}
	})
}

// FuzzExtractBinary: whatever the input (tar, tar.gz, zip or garbage),
// extraction never panics, writes nothing outside its directory, and stays
// within its limits.
func FuzzExtractBinary(f *testing.F) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, h := range []tar.Header{
		{Name: "Dockerfile", Typeflag: tar.TypeReg, Size: 7, Mode: 0o644},
		{Name: "out", Typeflag: tar.TypeSymlink, Linkname: "../.."},
		{Name: "hard", Typeflag: tar.TypeLink, Linkname: "Dockerfile"},
	} {
		_ = tw.WriteHeader(&h)
		if h.Size > 0 {
			_, _ = tw.Write([]byte("FROM x\n"))
		}
	}
	_ = tw.Close()
	f.Add(tarBuf.Bytes())
	var zipBuf bytes.Buffer
	zw := zip.NewWriter(&zipBuf)
	for _, name := range []string{"Dockerfile", "../escape", "a/b"} {
		w, _ := zw.Create(name)
		_, _ = w.Write([]byte(name))
	}
	_ = zw.Close()
	f.Add(zipBuf.Bytes())
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Add([]byte("BZh91AY&SY"))
	f.Add([]byte("PK\x05\x06"))
	f.Fuzz(func(t *testing.T, input []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "context")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		limits := ArchiveLimits{MaxBytes: 1 << 20, MaxEntries: 100}
		_ = extractBinary(bytes.NewReader(input), "", dir, limits)
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 1 {
			t.Fatalf("extraction wrote next to its directory: %v %v", entries, err)
		}
		var size int64
		n := 0
		_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, ierr := d.Info(); ierr == nil {
					size += info.Size()
				}
			}
			n++
			return nil
		})
		if size > limits.MaxBytes+1<<20 || n > limits.MaxEntries+1 {
			t.Fatalf("extraction wrote %d bytes in %d entries, over its limits", size, n)
		}
	})
}

// TestFetchGitRefusesBeforeGit: the fuzzed checks guard Fetch itself.
func TestFetchGitRefusesBeforeGit(t *testing.T) {
	_, err := Fetch(context.Background(), Options{Source: buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "ext::sh"}}}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "remote helper") {
		t.Fatalf("err = %v, want the remote helper refused", err)
	}
}
