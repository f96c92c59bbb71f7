// Package outdir guards the output directories the release generators
// replace as a whole (hack/release-manifests, hack/bundle): only one they
// wrote themselves is replaced.
package outdir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Replaceable returns nil when out does not exist, or is a directory whose
// file (a name inside it) starts with marker, the header writer puts
// there; otherwise an error saying what to do.
func Replaceable(out, file, marker, writer string) error {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("--out %s exists and is not a directory", out)
	}
	data, err := os.ReadFile(filepath.Join(out, file))
	if err != nil || !bytes.HasPrefix(data, []byte(marker)) {
		return fmt.Errorf("--out %s exists and was not written by %s: remove it or choose another directory", out, writer)
	}
	return nil
}
