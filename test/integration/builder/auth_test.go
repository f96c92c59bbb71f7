package builder_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/archway-build/archway/test/bed"
)

// authFile writes a docker config.json with user:password for registry.
func authFile(t testing.TB, registry, user, password string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"auths": map[string]any{
		registry: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRegistryCredentials pulls from and pushes to the htpasswd registry
// with credentials from a docker config file; wrong or missing credentials
// fail with the registry's refusal and the step it refused.
func TestRegistryCredentials(t *testing.T) {
	reg := theBed.AuthRegistry
	authBase, err := bed.SeedBaseImage(t.Context(), reg)
	if err != nil {
		t.Fatal(err)
	}
	good := authFile(t, reg.Host, reg.Username, reg.Password)
	wrong := authFile(t, reg.Host, reg.Username, "not-the-password")
	fromAuth := writeContext(t, "FROM "+authBase+"\nRUN uname -m > /arch\n")
	fromOpen := writeContext(t, archDockerfile())

	t.Run("right credentials pull, push, list and untag", func(t *testing.T) {
		g := NewWithT(t)
		out := reg.Host + "/it/auth:v1"
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64,linux/arm64", "--authfile", good, "-t", out, fromAuth)
		g.Expect(code).To(Equal(0), log)
		checkIndex(t.Context(), g, reg, out, []string{"linux/amd64", "linux/arm64"})
		tags, err := reg.Tags(t.Context(), "it/auth")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"v1"}))
	})

	t.Run("wrong credentials fail the pull", func(t *testing.T) {
		g := NewWithT(t)
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--authfile", wrong, "-t", reg.Host+"/it/auth:wrong", fromAuth)
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("linux/amd64: DockerBuildFailed: "))
		g.Expect(strings.ToLower(log)).To(Or(ContainSubstring("unauthorized"), ContainSubstring("authentication required")))
		g.Expect(log).NotTo(ContainSubstring("not-the-password"))
	})

	t.Run("wrong credentials fail the push", func(t *testing.T) {
		g := NewWithT(t)
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "--authfile", wrong, "-t", reg.Host+"/it/auth:push", fromOpen)
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("linux/amd64: PushImageToRegistryFailed: pushing: pushing to " + reg.Host + "/it/auth:push-linux-amd64"))
		g.Expect(strings.ToLower(log)).To(Or(ContainSubstring("unauthorized"), ContainSubstring("authentication required")))
	})

	t.Run("no credentials fail the push", func(t *testing.T) {
		g := NewWithT(t)
		log, code := runBuilder(t, nil, "build", "--platform", "linux/amd64", "-t", reg.Host+"/it/auth:anon", fromOpen)
		g.Expect(code).To(Equal(1), log)
		g.Expect(log).To(ContainSubstring("PushImageToRegistryFailed"))
		g.Expect(strings.ToLower(log)).To(Or(ContainSubstring("unauthorized"), ContainSubstring("authentication required")))
	})
}
