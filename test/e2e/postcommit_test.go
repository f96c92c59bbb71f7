package e2e

import (
	"testing"

	. "github.com/onsi/gomega"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestPostCommitHook: a post-commit script runs in each platform's built
// image before its push, with the image's environment and the hook's args
// as positional parameters, arm64's under emulation. It fails on arm64
// only (the image's /machine, uname -m of its RUN step, says aarch64),
// which is allowed to fail: that
// platform fails with PostCommitHookFailed and the hook's output in its log
// snippet, its image is not pushed, and the index holds amd64 alone.
// Without the hook the index would hold both.
func TestPostCommitHook(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "postcommit")
	platforms := []string{"linux/amd64", "linux/arm64"}
	bc := h.buildConfigSpec(machineDockerfile(env.Bed.BaseImage)+"ENV GREETING=hello\n", platforms, []string{"linux/arm64"})
	bc.Spec.PostCommit = buildv1.BuildPostCommitSpec{
		// No command substitution: /bin/sh -i (OpenShift's) of busybox
		// prints its banner in every subshell's output.
		Script: `read m < /machine; echo "hook on $m: $GREETING $1"; [ "$GREETING $1" = "hello first" ] || exit 5; [ "$m" != aarch64 ] || exit 7`,
		Args:   []string{"first"},
	}
	h.create(bc)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)

	arm64 := entries(b)["linux/arm64"]
	g.Expect(arm64.Phase).To(Equal(buildv1.BuildPhaseFailed))
	g.Expect(arm64.Reason).To(Equal(buildv1.StatusReasonPostCommitHookFailed))
	g.Expect(arm64.Message).To(ContainSubstring("exit status 7"))
	g.Expect(arm64.LogSnippet).To(ContainSubstring("hook on aarch64: hello first"))
	g.Expect(arm64.Output).To(BeNil(), "arm64's image is not pushed")
	g.Expect(entries(b)["linux/amd64"].Phase).To(Equal(buildv1.BuildPhaseComplete))

	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(map[string]string{"linux/amd64": framework.UnameOf["linux/amd64"]}))
}
