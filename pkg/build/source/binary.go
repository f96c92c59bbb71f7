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

// extractBinary writes a Binary source into dir: the stream as the single
// file asFile when that is set, else the archive's content (tar, optionally
// gzip or bzip2 compressed, or zip, told apart by their first bytes). Every
// entry is written through an os.Root on dir, so no entry, symbolic links
// included, can write outside it.
func extractBinary(r io.Reader, asFile, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if asFile != "" {
		if asFile != filepath.Base(asFile) || asFile == "." || asFile == ".." {
			return fmt.Errorf("asFile %q must be a file name, without directories", asFile)
		}
		f, err := root.OpenFile(asFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
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
		return extractTar(gz, root)
	case bytes.HasPrefix(magic, []byte("BZh")):
		return extractTar(bzip2.NewReader(br), root)
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")), bytes.HasPrefix(magic, []byte("PK\x05\x06")):
		return extractZip(br, root)
	}
	return extractTar(br, root)
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

func extractTar(r io.Reader, root *os.Root) error {
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
		mode := fs.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeEntry(root, name, tr, mode); err != nil {
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

func extractZip(r io.Reader, root *os.Root) error {
	// zip needs random access: keep the stream in a file next to the
	// content (outside it), removed afterwards.
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
	for _, f := range zr.File {
		name, ok, err := entryName(f.Name)
		if err != nil {
			return err
		}
		if !ok {
			continue
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
		err = writeEntry(root, name, rc, f.Mode().Perm())
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
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
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
