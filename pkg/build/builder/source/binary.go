package source

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ArchiveLimits bound what a Binary source may make the builder read and
// write, so that an archive cannot fill the build pod's disk or keep it
// busy (a decompression bomb, millions of empty entries).
type ArchiveLimits struct {
	// MaxBytes bounds the binary input as it is streamed (compressed), the
	// zip kept on disk to read it, and the bytes extracted from it in all.
	MaxBytes int64
	// MaxEntries bounds the entries of an archive (files, directories and
	// links).
	MaxEntries int
}

// DefaultArchiveLimits are the limits of a Binary source unless Options
// says otherwise: 2 GiB and 100,000 entries.
var DefaultArchiveLimits = ArchiveLimits{MaxBytes: 2 << 30, MaxEntries: 100_000}

// extractor writes one binary input through an os.Root, counting entries
// and bytes against its limits.
type extractor struct {
	root    *os.Root
	limits  ArchiveLimits
	written int64
	entries int
}

// extractBinary writes a Binary source into dir: the stream as the single
// file asFile when that is set, else the archive's content (tar, optionally
// gzip or bzip2 compressed, or zip, told apart by their first bytes). Every
// entry is written through an os.Root on dir, so no entry, symbolic links
// included, can write outside it; limits bound the input, the entries and
// the bytes written.
func extractBinary(r io.Reader, asFile, dir string, limits ArchiveLimits) error {
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = DefaultArchiveLimits.MaxBytes
	}
	if limits.MaxEntries <= 0 {
		limits.MaxEntries = DefaultArchiveLimits.MaxEntries
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	x := &extractor{root: root, limits: limits}
	r = &limitedReader{r: r, left: limits.MaxBytes, limit: limits.MaxBytes}
	if asFile != "" {
		if asFile != filepath.Base(asFile) || asFile == "." || asFile == ".." {
			return fmt.Errorf("asFile %q must be a file name, without directories", asFile)
		}
		return x.writeEntry(asFile, r, 0o644)
	}
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer func() { _ = gz.Close() }()
		return x.extractTar(gz)
	case bytes.HasPrefix(magic, []byte("BZh")):
		return x.extractTar(bzip2.NewReader(br))
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")), bytes.HasPrefix(magic, []byte("PK\x05\x06")):
		return x.extractZip(br)
	}
	return x.extractTar(br)
}

// errInputTooLarge is the error of a binary input over the limit.
type errInputTooLarge struct{ limit int64 }

func (e errInputTooLarge) Error() string {
	return fmt.Sprintf("the binary input is larger than %d bytes, the limit: send a smaller archive (leave out what the build does not need)", e.limit)
}

// limitedReader reads at most left bytes and fails after, rather than end
// as io.LimitReader does: a cut archive must not pass for a whole one.
type limitedReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a stream of exactly the limit from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, errInputTooLarge{l.limit}
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// entry counts one more archive entry against the limit.
func (x *extractor) entry() error {
	x.entries++
	if x.entries > x.limits.MaxEntries {
		return fmt.Errorf("the archive has more than %d entries, the limit: send fewer files (an archive of a directory the build needs)", x.limits.MaxEntries)
	}
	return nil
}

// entryName cleans an archive entry's name into a path relative to the
// root; ok is false for the root itself.
func entryName(name string) (string, bool, error) {
	// Leading slashes are dropped, as tar does; ".." is refused.
	rel := path.Clean(strings.TrimLeft(strings.ReplaceAll(name, `\`, "/"), "/"))
	if rel == "." {
		return "", false, nil
	}
	if !filepath.IsLocal(rel) {
		return "", false, fmt.Errorf("archive entry %q leads outside the directory", name)
	}
	return rel, true, nil
}

func (x *extractor) extractTar(r io.Reader) error {
	root := x.root
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar archive: %w", err)
		}
		name, ok, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := x.entry(); err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := x.writeEntry(name, tr, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			target, ok, err := entryName(hdr.Linkname)
			if err != nil || !ok {
				return fmt.Errorf("archive entry %q links to %q, outside the directory", hdr.Name, hdr.Linkname)
			}
			_ = root.Remove(name)
			if err := root.Link(target, name); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like have no place in a build context.
		}
	}
}

func (x *extractor) extractZip(r io.Reader) error {
	root := x.root
	// zip needs random access: keep the stream in a file next to the
	// content (outside it), removed afterwards; never in memory. The
	// stream's limit bounds the file.
	tmp, err := os.CreateTemp("", "archway-binary-*.zip")
	if err != nil {
		return err
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	size, err := io.Copy(tmp, r)
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(tmp, size)
	if err != nil {
		return fmt.Errorf("reading the zip archive: %w", err)
	}
	if len(zr.File) > x.limits.MaxEntries {
		x.entries = len(zr.File) - 1
		return x.entry()
	}
	for _, f := range zr.File {
		name, ok, err := entryName(f.Name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := x.entry(); err != nil {
			return err
		}
		if f.FileInfo().IsDir() {
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		err = x.writeEntry(name, rc, f.Mode().Perm())
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeEntry writes one file, counting its bytes against the limit of the
// bytes extracted (whatever the archive's headers claim).
func (x *extractor) writeEntry(name string, r io.Reader, mode fs.FileMode) error {
	root := x.root
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	_ = root.Remove(name)
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	left := x.limits.MaxBytes - x.written
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	x.written += n
	if err == nil && n > left {
		err = fmt.Errorf("the archive extracts to more than %d bytes, the limit: send a smaller archive (leave out what the build does not need)", x.limits.MaxBytes)
	}
	if err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
