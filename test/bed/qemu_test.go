package bed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQemuHandlersRegistered checks this machine: the bed's foreign
// architectures need qemu, which hack/tools.sh registers.
func TestQemuHandlersRegistered(t *testing.T) {
	if err := CheckQemu(); err != nil {
		t.Fatal(err)
	}
}

// TestQemuCheckExplains checks what CheckQemu says about binfmt_misc
// directories in various states.
func TestQemuCheckExplains(t *testing.T) {
	const good = "enabled\ninterpreter /usr/libexec/qemu-binfmt/x-binfmt-P\nflags: POF\noffset 0\nmagic 7f454c46\nmask ffffffff\n"
	all := func() map[string]string {
		files := map[string]string{"status": "enabled\n", "register": ""}
		for _, h := range qemuHandlers {
			files["qemu-"+h] = good
		}
		return files
	}
	tests := []struct {
		name  string
		files map[string]string // nil: binfmt_misc not mounted
		edit  func(map[string]string)
		want  []string // substrings of the error; none: no error
	}{
		{name: "all registered", files: all()},
		{name: "not mounted", want: []string{"not mounted", "make tools"}},
		{name: "disabled", files: all(), edit: func(f map[string]string) { f["status"] = "disabled\n" },
			want: []string{"disabled", "echo 1 >"}},
		{name: "missing handlers", files: all(), edit: func(f map[string]string) { delete(f, "qemu-s390x"); delete(f, "qemu-arm") },
			want: []string{"qemu-arm, qemu-s390x not registered", "make tools"}},
		{name: "handler disabled", files: all(), edit: func(f map[string]string) { f["qemu-aarch64"] = strings.Replace(good, "enabled", "disabled", 1) },
			want: []string{"qemu-aarch64 is disabled", "make tools"}},
		{name: "no fix-binary flag", files: all(), edit: func(f map[string]string) { f["qemu-ppc64le"] = strings.Replace(good, "POF", "OC", 1) },
			want: []string{"qemu-ppc64le lacks the F", "echo -1 >", "make tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "binfmt_misc")
			if tt.files != nil {
				if tt.edit != nil {
					tt.edit(tt.files)
				}
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, contents := range tt.files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(contents), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := checkBinfmt(dir)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("checkBinfmt: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("checkBinfmt: no error, want one saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkBinfmt: %v; want it to say %q", err, w)
				}
			}
		})
	}
}
