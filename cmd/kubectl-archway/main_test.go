package main_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/archway-build/archway/test/bed"
)

// TestHelp runs the plugin binary as kubectl runs it (kubectl-archway on
// the PATH) with --help, and each command with --help: every usage line
// names the command as users type it, kubectl archway, and each command
// shows the flags it has at oc's level.
func TestHelp(t *testing.T) {
	bin, err := bed.GoBuild(t.Context(), t.TempDir(), "./cmd/kubectl-archway")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command string
		usage   string   // the usage line after "kubectl archway "
		flags   []string // as the flags table shows them: "-f, --follow", "--tail"
		more    []string // other text the help shows
	}{
		{"", "[command]", nil, []string{"start-build", "logs", "describe", "cancel-build", "prune", "version", "completion"}},
		{"start-build", "start-build (BUILDCONFIG | --from-build=BUILD) [flags]",
			[]string{"--from-build", "--build-arg", "--no-cache", "--from-repo", "--from-dir", "--from-file", "--from-archive", "--exclude",
				"--commit", "-e, --env", "--build-loglevel", "--platform", "--allow-fail", "-o, --output", "-F, --follow", "-w, --wait", "--list-webhooks", "--incremental"},
			[]string{"--platforms is the same flag", "jsonpath", "go-template", "custom-columns"}},
		{"logs", "logs (build/NAME | bc/NAME | NAME) [flags]",
			[]string{"--tail", "--since", "--since-time", "--timestamps", "-f, --follow", "--platform", "--version", "--limit-bytes", "--ignore-errors"}, nil},
		{"cancel-build", "cancel-build (NAME | build/NAME | bc/NAME)... [flags]", []string{"--state", "--dump-logs", "--restart"}, []string{"new, pending, running"}},
		{"describe", "describe (build | bc) (NAME | -l SELECTOR) [flags]", []string{"--build-endpoint", "-l, --selector", "--show-events"}, []string{"webhook URLs"}},
		{"version", "version [flags]", []string{"--client", "-o, --output"}, nil},
		{"prune cache", "prune cache BUILDCONFIG [flags]", []string{"--platform", "-o, --output", "--confirm", "--keep-younger-than", "--repository"},
			[]string{"--platforms is the same flag", "jsonpath"}},
		{"completion", "completion [command]", nil, []string{"bash", "zsh", "fish"}},
	} {
		t.Run(cmp(tc.command), func(t *testing.T) {
			args := append(strings.Fields(tc.command), "--help")
			out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl-archway %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			help := string(out)
			// completion writes a script for the binary itself, named
			// so (kubectl completes a plugin through
			// kubectl_complete-archway, which runs the binary).
			if strings.Contains(help, "kubectl-archway") && tc.command != "completion" {
				t.Errorf("the help names the binary, kubectl-archway, not the command users type:\n%s", help)
			}
			if want := "Usage:\n  kubectl archway " + tc.usage + "\n"; !strings.Contains(help, want) {
				t.Errorf("no usage line %q:\n%s", want, help)
			}
			for _, f := range tc.flags {
				if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(f) + `\b`).MatchString(help) {
					t.Errorf("no flag %s:\n%s", f, help)
				}
			}
			for _, s := range tc.more {
				if !strings.Contains(help, s) {
					t.Errorf("the help does not say %q:\n%s", s, help)
				}
			}
		})
	}
}

// cmp names a subtest after its command.
func cmp(command string) string {
	if command == "" {
		return "root"
	}
	return command
}
