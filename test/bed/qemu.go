package bed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// binfmtDir is where the kernel's binfmt_misc interface is mounted.
const binfmtDir = "/proc/sys/fs/binfmt_misc"

// qemuHandlers are the binfmt_misc handlers, qemu-<name>, that run the
// binaries of the bed's foreign architectures: arm64, arm/v7, ppc64le and
// s390x.
var qemuHandlers = []string{"aarch64", "arm", "ppc64le", "s390x"}

// CheckQemu verifies that the kernel runs arm64, arm, ppc64le and s390x
// binaries through qemu-user-static, as image builds for those platforms
// need. It only looks: hack/tools.sh registers the handlers, because
// binfmt_misc is machine-wide and needs root.
func CheckQemu() error {
	return checkBinfmt(binfmtDir)
}

// checkBinfmt checks the qemu handlers in a binfmt_misc directory.
func checkBinfmt(dir string) error {
	const fix = "run `make tools` (or `hack/tools.sh apt qemu`)"
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return fmt.Errorf("the bed needs qemu-user-static registered with binfmt_misc, which is not mounted at %s (%w): %s", dir, err, fix)
	}
	if strings.TrimSpace(string(status)) != "enabled" {
		return fmt.Errorf("the bed needs qemu-user-static registered with binfmt_misc, which is disabled (%s/status): enable it with `echo 1 > %s/status`", dir, dir)
	}
	var missing, broken []string
	for _, name := range qemuHandlers {
		path := filepath.Join(dir, "qemu-"+name)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, "qemu-"+name)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading binfmt_misc handler %s: %w", path, err)
		}
		if problem := handlerProblem(string(data)); problem != "" {
			broken = append(broken, fmt.Sprintf("%s %s", path, problem))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the bed needs qemu-user-static registered with binfmt_misc, but %s not registered in %s: %s",
			strings.Join(missing, ", "), dir, fix)
	}
	if len(broken) > 0 {
		return fmt.Errorf("the bed needs qemu-user-static registered with binfmt_misc, but %s: remove those handlers (`echo -1 > <handler>`), then %s",
			strings.Join(broken, "; "), fix)
	}
	return nil
}

// handlerProblem says what is wrong with a binfmt_misc handler from the
// contents of its file, or "" when it is usable.
func handlerProblem(contents string) string {
	lines := strings.Split(strings.TrimSpace(contents), "\n")
	if lines[0] != "enabled" {
		return "is disabled"
	}
	for _, line := range lines[1:] {
		if flags, ok := strings.CutPrefix(line, "flags:"); ok {
			// Without F the kernel opens the interpreter at exec time, inside
			// the build's chroot, where it does not exist.
			if !strings.Contains(flags, "F") {
				return "lacks the F (fix binary) flag"
			}
			return ""
		}
	}
	return "has no flags line"
}
