package builder_test

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestDockerBuildLogLevel: BUILD_LOGLEVEL in the strategy's env (what
// start-build --build-loglevel sets) raises the builder's log level as
// OpenShift's builder does: 5 adds buildah's and containers/image's debug
// lines, which a build without it does not print; a value that is not a
// level is reported and builds as usual.
func TestDockerBuildLogLevel(t *testing.T) {
	output := theBed.Registry.Host + "/it/loglevel:v1"
	run := func(t *testing.T, level string) string {
		t.Helper()
		g := NewWithT(t)
		b := newBuild("loglevel", "loglevel-1", "FROM scratch\nENV A=1\n", output, nil, nil)
		if level != "" {
			b.Spec.Strategy.DockerStrategy.Env = []corev1.EnvVar{{Name: "BUILD_LOGLEVEL", Value: level}}
		}
		log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "")}, "docker-build", "--no-report")
		g.Expect(code).To(Equal(0), log)
		return log
	}
	if log := run(t, ""); containsDebug(log) {
		t.Errorf("debug lines without BUILD_LOGLEVEL:\n%s", log)
	}
	if log := run(t, "5"); !containsDebug(log) {
		t.Errorf("no debug line with BUILD_LOGLEVEL=5:\n%s", log)
	}
	if log := run(t, "loud"); containsDebug(log) || !strings.Contains(log, `Warning: BUILD_LOGLEVEL="loud" is not a log level`) {
		t.Errorf("BUILD_LOGLEVEL=loud:\n%s", log)
	}
}

// containsDebug says whether a builder's log has a logrus debug line.
func containsDebug(log string) bool {
	return regexp.MustCompile(`(?m)level=debug `).MatchString(log)
}
