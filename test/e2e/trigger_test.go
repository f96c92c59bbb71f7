package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestGitHubPushBuildsFourPlatforms: a GitHub push delivery to
// build-controller's webhook endpoint (HTTPS) starts the BuildConfig's
// build, which runs end to end on four platforms through the pod runner;
// the Build records the pushed commit and the GitHub cause, and kubectl
// archway logs prints every platform's log with its platform.
func TestGitHubPushBuildsFourPlatforms(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "push")
	bc := h.buildConfig(machineDockerfile(env.Bed.BaseImage), framework.Platforms, nil)
	commit := h.githubPush(g, bc)

	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
	g.Expect(b.Spec.Revision).NotTo(BeNil())
	g.Expect(b.Spec.Revision.Git.Commit).To(Equal(commit))
	g.Expect(b.Spec.Revision.Git.Author.Name).To(Equal("Mona Lisa"))
	g.Expect(b.Spec.TriggeredBy).To(HaveLen(1))
	g.Expect(b.Spec.TriggeredBy[0].Message).To(Equal("GitHub WebHook"))
	for _, p := range framework.Platforms {
		g.Expect(entries(b)[p].Phase).To(Equal(buildv1.BuildPhaseComplete), "entry of %s", p)
	}
	machines, err := indexChildren(h.ctx, h.output(), "/machine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(machines).To(Equal(framework.UnameOf))

	var logs bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &logs, ErrOut: &logs})
	cmd.SetArgs([]string{"logs", "build/" + b.Name, "--kubeconfig", env.Bed.Kubeconfig, "-n", h.ns})
	g.Expect(cmd.ExecuteContext(h.ctx)).To(Succeed(), logs.String())
	for _, p := range framework.Platforms {
		g.Expect(logs.String()).To(ContainSubstring("["+p+"] "), "log lines of %s", p)
	}
	var arm64Lines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(line, "[linux/arm64] ") {
			arm64Lines = append(arm64Lines, line)
		}
	}
	g.Expect(strings.Join(arm64Lines, "\n")).To(ContainSubstring("uname -m > /machine"))
}

// githubPush gives bc a GitHub webhook trigger and posts GitHub's push of
// the head of its repository's main to build-controller's webhook
// endpoint, as GitHub would; it checks build 1 was started, watching it,
// and returns the pushed commit.
func (h *harness) githubPush(g Gomega, bc *buildv1.BuildConfig) string {
	h.t.Helper()
	const secret = "c0ffee5ecret4push"
	g.Expect(env.Bed.Client.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "github-hook"},
		Data: map[string][]byte{buildv1.WebHookSecretKey: []byte(secret)}})).To(Succeed())
	bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{{Type: buildv1.GitHubWebHookBuildTriggerType,
		GitHubWebHook: &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: "github-hook"}}}}
	g.Expect(env.Bed.Client.Update(h.ctx, bc)).To(Succeed())

	out, err := exec.CommandContext(h.ctx, "git", "ls-remote", bc.Spec.Source.Git.URI, "refs/heads/main").Output()
	g.Expect(err).NotTo(HaveOccurred())
	commit := strings.Fields(string(out))[0]
	var push map[string]any
	raw, err := os.ReadFile("../../pkg/build/trigger/scm/testdata/github-push.json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(raw, &push)).To(Succeed())
	push["after"] = commit
	push["head_commit"].(map[string]any)["id"] = commit
	body, _ := json.Marshal(push)

	h.watchBuild(instantiate.Name(bc.Name, 1))
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodPost,
		env.WebhookURL+"/apis/build.openshift.io/v1/namespaces/"+h.ns+"/buildconfigs/"+bc.Name+"/webhooks/"+secret+"/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	resp, err := env.WebhookClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(answer))
	g.Expect(string(answer)).To(ContainSubstring(`"build":"hello-1"`))
	return commit
}

// TestWebhookCommitMustBeOnRef: whoever holds a BuildConfig's webhook URL
// names the commit built, but only a commit of the BuildConfig's ref is
// built. A GitHub push claiming main with a commit of an unreviewed
// branch, and a generic call naming that commit without a ref (which
// builds the BuildConfig's ref), each start a Build that fails
// FetchSourceFailed saying the commit is not on main; main's own older
// commit builds.
func TestWebhookCommitMustBeOnRef(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "onref")
	bc := h.buildConfig(machineDockerfile(env.Bed.BaseImage), []string{"linux/amd64"}, nil)
	const secret = "0nref5ecret4push"
	g.Expect(env.Bed.Client.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hook"},
		Data: map[string][]byte{buildv1.WebHookSecretKey: []byte(secret)}})).To(Succeed())
	ref := &buildv1.SecretLocalReference{Name: "hook"}
	bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{
		{Type: buildv1.GitHubWebHookBuildTriggerType, GitHubWebHook: &buildv1.WebHookTrigger{SecretReference: ref}},
		{Type: buildv1.GenericWebHookBuildTriggerType, GenericWebHook: &buildv1.WebHookTrigger{SecretReference: ref}},
	}
	g.Expect(env.Bed.Client.Update(h.ctx, bc)).To(Succeed())

	repo := strings.TrimPrefix(bc.Spec.Source.Git.URI, "file://")
	git := func(args ...string) string {
		cmd := exec.CommandContext(h.ctx, "git", append([]string{"-c", "user.name=mallory", "-c", "user.email=mallory@example.invalid"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	old := git("rev-parse", "main")
	git("checkout", "-q", "-b", "unreviewed")
	git("commit", "-q", "--allow-empty", "-m", "unreviewed")
	unreviewed := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	git("commit", "-q", "--allow-empty", "-m", "reviewed")

	deliver := func(typ string, hdr map[string]string, body []byte) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(h.ctx, http.MethodPost,
			env.WebhookURL+"/apis/build.openshift.io/v1/namespaces/"+h.ns+"/buildconfigs/"+bc.Name+"/webhooks/"+secret+"/"+typ, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := env.WebhookClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		answer, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(answer))
		var r struct{ Build string }
		g.Expect(json.Unmarshal(answer, &r)).To(Succeed())
		return r.Build
	}
	var push map[string]any
	raw, err := os.ReadFile("../../pkg/build/trigger/scm/testdata/github-push.json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(raw, &push)).To(Succeed())
	githubPush := func(commit string) []byte {
		push["ref"], push["after"] = "refs/heads/main", commit
		push["head_commit"].(map[string]any)["id"] = commit
		body, _ := json.Marshal(push)
		return body
	}
	generic := func(commit string) []byte {
		body, _ := json.Marshal(map[string]any{"git": map[string]any{"commit": commit}})
		return body
	}
	for i, c := range []struct {
		name, typ string
		hdr       map[string]string
		body      []byte
		complete  bool
	}{
		{"a GitHub push to main of an unreviewed branch's commit", "github", map[string]string{"X-GitHub-Event": "push"}, githubPush(unreviewed), false},
		{"a generic call without a ref naming that commit", "generic", nil, generic(unreviewed), false},
		{"a generic call naming an older commit of main", "generic", nil, generic(old), true},
	} {
		h.watchBuild(instantiate.Name(bc.Name, int64(i+1)))
		g.Expect(deliver(c.typ, c.hdr, c.body)).To(Equal(h.b.Name), c.name)
		b := h.waitTerminal()
		if c.complete {
			g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "%s: %s %s", c.name, b.Status.Reason, b.Status.Message)
			continue
		}
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), c.name)
		e := entries(b)["linux/amd64"]
		g.Expect(e.Reason).To(Equal(buildv1.StatusReasonFetchSourceFailed), "%s: %s", c.name, e.Message)
		g.Expect(e.Message).To(ContainSubstring("commit "+unreviewed+" is not on the source ref: it is not reachable from main"), c.name)
	}
}
