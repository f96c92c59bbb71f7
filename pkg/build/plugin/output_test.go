package plugin

import (
	"bytes"
	"testing"
)

func TestLineWriterKeepsTheTableBelow(t *testing.T) {
	var out bytes.Buffer
	w := &lineWriter{out: &out, tty: true, width: 20}
	w.line("", "one")
	w.setStatus("A  Pending\nB  Pending\n")
	w.line("linux/arm64", "two")
	w.setStatus("A  Running on a-very-long-node-name-1\nB  Pending\n")
	w.endStatus()
	w.line("", "three")
	want := "one\n" +
		"A  Pending\nB  Pending\n" +
		"\x1b[2F\x1b[J[linux/arm64] two\nA  Pending\nB  Pending\n" +
		"\x1b[2F\x1b[JA  Running on a-very-long-node-name-1\nB  Pending\n" +
		"three\n"
	if out.String() != want {
		t.Errorf("output:\n%q\nwant\n%q", out.String(), want)
	}
	if r := rows("A  Running on a-very-long-node-name-1\nB\n", 20); r != 3 {
		t.Errorf("rows: %d, want 3 (the first line wraps once)", r)
	}
}

func TestLineWriterPlain(t *testing.T) {
	var out bytes.Buffer
	w := &lineWriter{out: &out}
	w.line("linux/s390x", "x")
	w.line("", "y")
	if out.String() != "[linux/s390x] x\ny\n" {
		t.Errorf("output %q", out.String())
	}
}
