package emulation

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// binfmtDir makes a binfmt_misc-like directory: status and handler files
// with the kernel's contents.
func binfmtDir(t *testing.T, status string, handlers map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"status": status + "\n", "register": ""}
	for name, contents := range handlers {
		files["qemu-"+name] = contents
	}
	for name, contents := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(contents), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	withF    = "enabled\ninterpreter /usr/libexec/qemu-binfmt/arm-binfmt-P\nflags: POF\noffset 0\nmagic 7f45\nmask ffff\n"
	withoutF = "enabled\ninterpreter /usr/libexec/qemu-binfmt/arm-binfmt-P\nflags: P\noffset 0\nmagic 7f45\nmask ffff\n"
	disabled = "disabled\ninterpreter /usr/libexec/qemu-binfmt/arm-binfmt-P\nflags: POF\n"
)

func TestRegistered(t *testing.T) {
	tests := []struct {
		name     string
		status   string
		handlers map[string]string
		want     map[string]bool
	}{
		{"enabled handlers with F count", "enabled", map[string]string{"arm": withF, "aarch64": withF}, map[string]bool{"arm": true, "arm64": true}},
		{"without F the RUN steps could not find the interpreter", "enabled", map[string]string{"arm": withoutF, "s390x": withF}, map[string]bool{"s390x": true}},
		{"a disabled handler does not count", "enabled", map[string]string{"arm": disabled}, map[string]bool{}},
		{"a disabled binfmt_misc has none", "disabled", map[string]string{"arm": withF}, map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Registered(binfmtDir(t, tt.status, tt.handlers))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Registered(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("a missing binfmt_misc: %v", err)
	}
}

func TestRegister(t *testing.T) {
	dir := binfmtDir(t, "enabled", map[string]string{"aarch64": withF})
	conf := t.TempDir()
	armLine := `:qemu-arm:M::\x7f\x45\x4c\x46:\xff\xff\xff\xff:/usr/libexec/qemu-binfmt/arm-binfmt-P:OPF`
	for name, line := range map[string]string{"arm": armLine, "s390x": `:qemu-s390x:M::\x7f:\xff:/q:OP`} {
		if err := os.WriteFile(filepath.Join(conf, "qemu-"+name+".conf"), []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done, err := Register(dir, conf, []string{"arm64", "arm"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{"arm"}) {
		t.Errorf("registered %v, want [arm] (arm64 was there already)", done)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "register")); string(got) != armLine {
		t.Errorf("wrote %q to register, want %q", got, armLine)
	}
	if _, err := Register(dir, conf, []string{"s390x"}); err == nil || !strings.Contains(err.Error(), "without the F flag") {
		t.Errorf("a registration without F: %v", err)
	}
	if _, err := Register(dir, conf, []string{"ppc64le"}); err == nil || !strings.Contains(err.Error(), "install qemu-user-static") {
		t.Errorf("a missing registration line: %v", err)
	}
	if _, err := Register(dir, conf, []string{"x86-64"}); err == nil || !strings.Contains(err.Error(), "known: amd64") {
		t.Errorf("an unknown architecture: %v", err)
	}
	broken := binfmtDir(t, "enabled", map[string]string{"arm": withoutF})
	if _, err := Register(broken, conf, []string{"arm"}); err == nil || !strings.Contains(err.Error(), "echo -1") {
		t.Errorf("a handler registered without F: %v", err)
	}
}

func TestLabelChanges(t *testing.T) {
	tru := ptrTo("true")
	tests := []struct {
		name       string
		labels     map[string]string
		registered map[string]bool
		want       map[string]*string
	}{
		{"labels the registered foreign architectures", map[string]string{"kubernetes.io/arch": "amd64"},
			map[string]bool{"arm": true, "arm64": true}, map[string]*string{"emulation.archway.dev/arm": tru, "emulation.archway.dev/arm64": tru}},
		{"never the node's own architecture", map[string]string{"kubernetes.io/arch": "arm64"},
			map[string]bool{"arm": true, "arm64": true}, map[string]*string{"emulation.archway.dev/arm": tru}},
		{"removes the label of a handler that went away, and any other emulation label", map[string]string{"kubernetes.io/arch": "amd64",
			"emulation.archway.dev/arm": "true", "emulation.archway.dev/s390x": "true", "emulation.archway.dev/bogus": "x", "other": "y"},
			map[string]bool{"arm": true}, map[string]*string{"emulation.archway.dev/s390x": nil, "emulation.archway.dev/bogus": nil}},
		{"nothing when the labels say it already", map[string]string{"kubernetes.io/arch": "amd64", "emulation.archway.dev/arm": "true"},
			map[string]bool{"arm": true}, map[string]*string{}},
		{"clear: nothing registered removes them all", map[string]string{"emulation.archway.dev/arm": "true"},
			nil, map[string]*string{"emulation.archway.dev/arm": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, LabelChanges(tt.labels, tt.registered)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegistrable(t *testing.T) {
	conf := t.TempDir()
	for _, name := range []string{"x86_64", "s390x"} {
		if err := os.WriteFile(filepath.Join(conf, "qemu-"+name+".conf"), []byte(":qemu-"+name+":M::\\x7f:\\xff:/q:OPF\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keep, skipped, err := Registrable(conf, "arm64", []string{"amd64", "arm64", "arm", "s390x"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keep, []string{"amd64", "s390x"}) {
		t.Errorf("keep %v, want [amd64 s390x]", keep)
	}
	if len(skipped) != 2 || !strings.HasPrefix(skipped[0], "arm64 (the node's own") || !strings.HasPrefix(skipped[1], "arm (no registration line") {
		t.Errorf("skipped %q", skipped)
	}
	// Only the node's own architecture: nothing to do, no error.
	if keep, _, err := Registrable(conf, "amd64", []string{"amd64"}); err != nil || len(keep) != 0 {
		t.Errorf("only the native architecture: %v, %v", keep, err)
	}
	if _, _, err := Registrable(t.TempDir(), "amd64", []string{"amd64", "arm64"}); err == nil || !strings.Contains(err.Error(), "install qemu-user-static") {
		t.Errorf("no registration line at all: %v", err)
	}
	if _, _, err := Registrable(conf, "amd64", []string{"x86-64"}); err == nil || !strings.Contains(err.Error(), "known: amd64") {
		t.Errorf("an unknown architecture: %v", err)
	}
}
