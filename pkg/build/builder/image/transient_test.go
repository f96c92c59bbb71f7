package image

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestWatchWriter(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		want   bool
	}{
		{"absent", []string{"STEP 2/3: RUN true\n", "exit status 1\n"}, false},
		{"whole", []string{"Close_Fd " + reexecSealBusy + "\n"}, true},
		{"split across writes", []string{"Close_Fd sealing memfd co", "py: Device or resource", " busy\n"}, true},
		{"one byte at a time", splitBytes("x" + reexecSealBusy), true},
		{"other errno", []string{"Close_Fd sealing memfd copy: Operation not permitted\n"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ww := newWatchWriter(&out, reexecSealBusy)
			var all string
			for _, w := range tc.writes {
				if _, err := ww.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
				all += w
			}
			if ww.Seen() != tc.want {
				t.Errorf("Seen() = %v, want %v", ww.Seen(), tc.want)
			}
			if out.String() != all {
				t.Errorf("passed through %q, want %q", out.String(), all)
			}
			ww.Reset()
			if ww.Seen() {
				t.Error("Seen() after Reset")
			}
		})
	}
}

func splitBytes(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

func TestBuildRetryingReexec(t *testing.T) {
	failing := errors.New("building at STEP 2/3: exit status 1")
	cases := []struct {
		name     string
		busy     []bool // per attempt: print the EBUSY line
		fail     []bool // per attempt: fail
		wantRuns int
		wantErr  bool
	}{
		{"succeeds at once", []bool{false}, []bool{false}, 1, false},
		{"other failure is not retried", []bool{false}, []bool{true}, 1, true},
		{"busy then success", []bool{true, false}, []bool{true, false}, 2, false},
		{"busy every time stops after three", []bool{true, true, true, true}, []bool{true, true, true, true}, 3, true},
		{"busy printed but the build succeeded", []bool{true}, []bool{false}, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			watch := newWatchWriter(&out, reexecSealBusy)
			runs := 0
			id, err := buildRetryingReexec(context.Background(), watch, func() (string, error) {
				i := runs
				runs++
				if tc.busy[i] {
					_, _ = watch.Write([]byte("Close_Fd " + reexecSealBusy + "\n"))
				}
				if tc.fail[i] {
					return "", failing
				}
				return "image-id", nil
			})
			if runs != tc.wantRuns || (err != nil) != tc.wantErr {
				t.Fatalf("runs %d err %v; want runs %d, error %v", runs, err, tc.wantRuns, tc.wantErr)
			}
			if err == nil && id != "image-id" {
				t.Errorf("id %q", id)
			}
			if retries := strings.Count(out.String(), "building again"); retries != runs-1 {
				t.Errorf("%d retry lines for %d runs:\n%s", retries, runs, out.String())
			}
		})
	}
}
