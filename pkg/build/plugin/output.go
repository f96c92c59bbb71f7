package plugin

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// isTerminal says whether w is a terminal, where --follow redraws its
// table in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is w's width in columns, 0 when unknown.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil {
			return width
		}
	}
	return 0
}

// lineWriter writes whole lines from several streams without interleaving
// them. On a terminal (tty) it keeps a status block (the per-platform
// table) below the lines: each line is written above it, and a new block
// replaces the old one in place, with ANSI cursor movements. Elsewhere the
// block is not kept: a status change is written as lines.
type lineWriter struct {
	mu    sync.Mutex
	out   io.Writer
	tty   bool
	width int // the terminal's columns, for lines that wrap (0: none wrap)

	status     string // the block shown below the lines
	statusRows int    // the terminal rows it takes
}

func newLineWriter(out io.Writer, tty bool) *lineWriter {
	w := &lineWriter{out: out, tty: tty}
	if tty {
		w.width = terminalWidth(out)
	}
	return w
}

func (w *lineWriter) line(prefix, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prefix != "" {
		text = "[" + prefix + "] " + text
	}
	w.eraseStatus()
	_, _ = io.WriteString(w.out, text+"\n")
	w.drawStatus()
}

// setStatus replaces the status block (tty only).
func (w *lineWriter) setStatus(block string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.eraseStatus()
	w.status = block
	w.drawStatus()
}

// endStatus leaves the status block where it is, as ordinary lines.
func (w *lineWriter) endStatus() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status, w.statusRows = "", 0
}

// eraseStatus moves the cursor to the start of the status block and clears
// the screen below it.
func (w *lineWriter) eraseStatus() {
	if w.statusRows > 0 {
		_, _ = fmt.Fprintf(w.out, "\x1b[%dF\x1b[J", w.statusRows)
		w.statusRows = 0
	}
}

func (w *lineWriter) drawStatus() {
	if w.status == "" {
		return
	}
	_, _ = io.WriteString(w.out, w.status)
	w.statusRows = rows(w.status, w.width)
}

// rows is how many terminal rows block takes, each of its lines wrapping
// at width columns (0: no wrapping).
func rows(block string, width int) int {
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		r := 1
		if c := utf8.RuneCountInString(l); width > 0 && c > width {
			r = (c + width - 1) / width
		}
		n += r
	}
	return n
}
