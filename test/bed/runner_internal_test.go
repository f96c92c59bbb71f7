package bed

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestExpand follows Kubernetes' $(VAR) rules.
func TestExpand(t *testing.T) {
	g := NewWithT(t)
	vars := map[string]string{"A": "a", "EMPTY": ""}
	for in, want := range map[string]string{
		"plain":        "plain",
		"$(A)-$(A)":    "a-a",
		"$(MISSING)":   "$(MISSING)",
		"$$(A)":        "$(A)",
		"x$(EMPTY)y":   "xy",
		"cost $5":      "cost $5",
		"open $(A":     "open $(A",
		"trailing $":   "trailing $",
		"$(A)$$$(A)$$": "a$a$",
	} {
		g.Expect(expand(in, vars)).To(Equal(want), in)
	}
}

// TestImageRepository strips tags and digests but not registry ports.
func TestImageRepository(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"quay.io/archway/builder:v1":         "quay.io/archway/builder",
		"127.0.0.1:5000/archway/builder":     "127.0.0.1:5000/archway/builder",
		"127.0.0.1:5000/archway/builder:dev": "127.0.0.1:5000/archway/builder",
		"builder@sha256:abc":                 "builder",
		"quay.io/a/b:v1@sha256:abc":          "quay.io/a/b",
	} {
		g.Expect(imageRepository(in)).To(Equal(want), in)
	}
}

// TestStreamLog: tail, timestamps, limitBytes and partial lines of CRI log
// files, and following a file until its container ends.
func TestStreamLog(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c.log")
	content := "2026-11-22T10:00:00.1Z stdout F one\n" +
		"2026-11-22T10:00:01.2Z stderr P tw\n" +
		"2026-11-22T10:00:01.3Z stderr F o\n" +
		"2026-11-22T10:00:02.4Z stdout F three\n"
	g.Expect(os.WriteFile(path, []byte(content), 0o644)).To(Succeed())
	read := func(opts logOptions, done <-chan struct{}) string {
		f, err := os.Open(path)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = f.Close() }()
		rec := httptest.NewRecorder()
		err = streamLog(context.Background(), f, done, nil, &logWriter{w: rec, opts: opts})
		if err != nil {
			g.Expect(err).To(MatchError(errLimitReached))
		}
		return rec.Body.String()
	}
	g.Expect(read(logOptions{tailLines: -1}, nil)).To(Equal("one\ntwo\nthree\n"))
	g.Expect(read(logOptions{tailLines: 2}, nil)).To(Equal("two\nthree\n"))
	g.Expect(read(logOptions{tailLines: 0}, nil)).To(BeEmpty())
	g.Expect(read(logOptions{tailLines: 1, timestamps: true}, nil)).To(Equal("2026-11-22T10:00:02.4Z three\n"))
	g.Expect(read(logOptions{tailLines: -1, limitBytes: 6}, nil)).To(Equal("one\ntw"))
	since, _ := time.Parse(time.RFC3339, "2026-11-22T10:00:02Z")
	g.Expect(read(logOptions{tailLines: -1, since: since}, nil)).To(Equal("three\n"))
	text, err := readLogText(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text).To(Equal("one\ntwo\nthree\n"))

	// Following: a record written in two pieces shows once it is whole,
	// and the stream ends when done is closed.
	done := make(chan struct{})
	go func() {
		f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		defer func() { _ = f.Close() }()
		time.Sleep(100 * time.Millisecond)
		_, _ = f.WriteString("2026-11-22T10:00:03.5Z stdout F fo")
		time.Sleep(100 * time.Millisecond)
		_, _ = f.WriteString("ur\n")
		time.Sleep(100 * time.Millisecond)
		close(done)
	}()
	out := read(logOptions{tailLines: 1}, done)
	g.Expect(out).To(Equal("three\nfour\n"))
	g.Expect(strings.Count(out, "four")).To(Equal(1))
}

// TestUserNamespaceRefusals refuses what a kubelet refuses with
// hostUsers: false.
func TestUserNamespaceRefusals(t *testing.T) {
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{HostUsers: ptr.To(false), Containers: []corev1.Container{{Name: "c"}}}}
		mut(p)
		return p
	}
	for _, tt := range []struct {
		name       string
		pod        *corev1.Pod
		wantUserNS bool
		wantErr    string
	}{
		{name: "hostUsers unset", pod: pod(func(p *corev1.Pod) { p.Spec.HostUsers = nil })},
		{name: "hostUsers true", pod: pod(func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(true) })},
		{name: "hostUsers false", pod: pod(func(*corev1.Pod) {}), wantUserNS: true},
		{name: "privileged", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), wantUserNS: true, wantErr: `privileged container "c"`},
		{name: "privileged init container", pod: pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), wantUserNS: true, wantErr: `privileged container "i"`},
		{name: "host network", pod: pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), wantUserNS: true, wantErr: "hostNetwork"},
		{name: "host PID", pod: pod(func(p *corev1.Pod) { p.Spec.HostPID = true }), wantUserNS: true, wantErr: "hostPID"},
	} {
		userns, err := userNamespace(tt.pod)
		if userns != tt.wantUserNS {
			t.Errorf("%s: user namespace %v, want %v", tt.name, userns, tt.wantUserNS)
		}
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: error %v, want one naming %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestCapabilities(t *testing.T) {
	c := func(drop, add []corev1.Capability) corev1.Container {
		return corev1.Container{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: drop, Add: add}}}
	}
	for _, tt := range []struct {
		name string
		c    corev1.Container
		want []string
	}{
		{name: "none asked: the runtime's defaults", c: corev1.Container{}, want: runtimeDefaultCaps},
		{name: "drop ALL, add two", c: c([]corev1.Capability{"ALL"}, []corev1.Capability{"CAP_SYS_ADMIN", "chown"}), want: []string{"SYS_ADMIN", "CHOWN"}},
		{name: "drop one", c: c([]corev1.Capability{"NET_RAW"}, nil), want: slices.DeleteFunc(slices.Clone(runtimeDefaultCaps), func(s string) bool { return s == "NET_RAW" })},
		{name: "drop ALL", c: c([]corev1.Capability{"ALL"}, nil), want: nil},
	} {
		if got := capabilities(tt.c); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
