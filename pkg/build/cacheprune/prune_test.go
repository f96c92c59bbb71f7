package cacheprune

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestIsCacheTag(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for tag, want := range map[string]bool{
		hex:                    true,
		"result-" + hex:        true,
		strings.ToUpper(hex):   false,
		hex[:63]:               false,
		hex + "0":              false,
		"result-" + hex[:63]:   false,
		"results-" + hex:       false,
		"latest":               false,
		"v1-" + hex:            false,
		hex[:63] + "g":         false,
		"result-" + hex + "\n": false,
	} {
		if got := IsCacheTag(tag); got != want {
			t.Errorf("IsCacheTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Options{KeepYoungerThan: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative duration: %v", err)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero: %v", err)
	}
}

func TestLimitedBody(t *testing.T) {
	read := func(body string, declared, limit int64) (string, error) {
		b := &limitedBody{ReadCloser: io.NopCloser(strings.NewReader(body)), declared: declared, left: limit, limit: limit, what: "manifest"}
		data, err := io.ReadAll(b)
		return string(data), err
	}
	if got, err := read("abcd", 4, 4); err != nil || got != "abcd" {
		t.Errorf("at the limit: %q, %v", got, err)
	}
	if _, err := read("abcde", -1, 4); err == nil || !strings.Contains(err.Error(), "more than 4 bytes") {
		t.Errorf("over the limit, size unsaid: %v", err)
	}
	if _, err := read("ab", 5, 4); err == nil || !strings.Contains(err.Error(), "has 5 bytes, more than 4") {
		t.Errorf("declared over the limit: %v", err)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]Repository{{Error: "x"}, {Tags: []Tag{{Action: Removed}, {Action: Kept}, {Action: Failed}, {Action: WouldRemove}}}})
	if s != (Summary{Removed: 1, WouldRemove: 1, Kept: 1, Failed: 1, FailedRepositories: 1}) || s.Err() == nil {
		t.Errorf("summary %+v, %v", s, s.Err())
	}
	if err := Summarize([]Repository{{Tags: []Tag{{Action: Kept}}}}).Err(); err != nil {
		t.Errorf("no failure: %v", err)
	}
}

// TestWriteTableEscapes: a hostile registry's tag names and messages reach
// the table quoted, never as terminal control sequences.
func TestWriteTableEscapes(t *testing.T) {
	var out strings.Builder
	err := WriteTable(&out, []Repository{{Repository: "r", Tags: []Tag{
		{Tag: "evil\x1b]0;owned\x07", Action: Kept, Reason: "not a cache tag"},
		{Tag: strings.Repeat("a", 64), Action: Kept, Reason: "its manifest could not be read: \x1b[2Jgone"},
	}}}, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Errorf("control characters in the table:\n%q", out.String())
	}
	if !strings.Contains(out.String(), `"evil\x1b]0;owned\a"`) {
		t.Errorf("tag not quoted:\n%s", out.String())
	}
}
