package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/archway-build/archway/pkg/build/builder/image"
)

// printf writes to a build's log, ignoring write errors: the log goes to a
// terminal or a pod log, and failing to write there must not fail a build.
func printf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// closeBuilder shuts the builder's container store down, saying so in the
// log when that fails (layers may stay mounted).
func closeBuilder(b *image.Builder, log io.Writer) {
	if err := b.Close(); err != nil {
		printf(log, "Warning: %v\n", err)
	}
}

// lockedWriter serializes writes to w from the builds that run at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter writes each complete line it is given to out with a prefix
// (e.g. "[linux/arm64] "), one line per Write on out so that the lines of
// builds running at once never interleave within a line. Carriage returns
// (progress bars) end a line too. Flush writes a last, unterminated line.
type prefixWriter struct {
	mu     sync.Mutex
	out    io.Writer
	prefix []byte
	buf    []byte
}

func newPrefixWriter(out io.Writer, prefix string) *prefixWriter {
	return &prefixWriter{out: out, prefix: []byte(prefix)}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\n\r")
		if i < 0 {
			break
		}
		line := p.buf[:i]
		p.buf = p.buf[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := p.emit(line); err != nil {
			return len(b), err
		}
	}
	return len(b), nil
}

// Flush writes what is left of an unterminated line.
func (p *prefixWriter) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(bytes.TrimSpace(p.buf)) == 0 {
		p.buf = nil
		return nil
	}
	err := p.emit(p.buf)
	p.buf = nil
	return err
}

func (p *prefixWriter) emit(line []byte) error {
	out := make([]byte, 0, len(p.prefix)+len(line)+1)
	out = append(out, p.prefix...)
	out = append(out, line...)
	out = append(out, '\n')
	_, err := p.out.Write(out)
	return err
}
