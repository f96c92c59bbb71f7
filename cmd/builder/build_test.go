package main

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagebuild"
)

func TestPrefixWriter(t *testing.T) {
	var out bytes.Buffer
	w := newPrefixWriter(&out, "[linux/arm64] ")
	for _, chunk := range []string{"STEP 1/2: FROM x\nSTE", "P 2/2: RUN true\n", "\n", "Copying 10%\rCopying 100%\r\n", "no newline"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "[linux/arm64] STEP 1/2: FROM x\n[linux/arm64] STEP 2/2: RUN true\n[linux/arm64] Copying 10%\n[linux/arm64] Copying 100%\n[linux/arm64] no newline\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

func TestPrefixWritersDoNotInterleaveLines(t *testing.T) {
	out := &lockedWriter{w: &bytes.Buffer{}}
	var wg sync.WaitGroup
	for _, p := range []string{"a", "b", "c", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newPrefixWriter(out, "["+p+"] ")
			for range 200 {
				_, _ = w.Write([]byte("hello "))
				_, _ = w.Write([]byte("world\n"))
			}
		}()
	}
	wg.Wait()
	for _, line := range strings.Split(strings.TrimSpace(out.w.(*bytes.Buffer).String()), "\n") {
		if !strings.HasPrefix(line, "[") || !strings.HasSuffix(line, "] hello world") {
			t.Fatalf("interleaved line %q", line)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	_, _ = tb.Write([]byte("abc"))
	_, _ = tb.Write([]byte("defgh"))
	if tb.String() != "defgh" {
		t.Errorf("got %q", tb.String())
	}
}

func TestParseKeyValues(t *testing.T) {
	t.Setenv("FROM_ENV", "env-value")
	got, err := parseKeyValues([]string{"A=1", "B=", "C=x=y", "FROM_ENV", "UNSET_VAR_FOR_TEST"}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "", "C": "x=y", "FROM_ENV": "env-value"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := parseKeyValues([]string{"NOVALUE"}, false); err == nil {
		t.Error("a label without a value was accepted")
	}
	if _, err := parseKeyValues([]string{"=x"}, true); err == nil {
		t.Error("an empty name was accepted")
	}
}

func TestPlanLocalBuild(t *testing.T) {
	tests := []struct {
		name    string
		opts    localBuildOptions
		wantErr string
		check   func(t *testing.T, p localPlan)
	}{
		{
			name: "defaults",
			opts: localBuildOptions{},
			check: func(t *testing.T, p localPlan) {
				if !reflect.DeepEqual(p.platforms, []string{imagebuild.HostPlatform().String()}) || p.jobs != 1 || p.output != "" || p.format != imagebuild.FormatOCI {
					t.Errorf("plan %+v", p)
				}
			},
		},
		{
			name: "four platforms, loopback output",
			opts: localBuildOptions{platforms: []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x", "linux/arm/v7"},
				tag: "127.0.0.1:5000/app:v1", allowFail: []string{"linux/s390x"}, format: "docker"},
			check: func(t *testing.T, p localPlan) {
				if p.jobs != maxDefaultJobs || p.output != "127.0.0.1:5000/app:v1" || p.format != imagebuild.FormatDocker {
					t.Errorf("plan %+v", p)
				}
			},
		},
		{
			name: "allow-fail compares platforms normalized",
			opts: localBuildOptions{platforms: []string{"linux/arm64"}, allowFail: []string{"linux/arm64/v8"}, jobs: 3},
			check: func(t *testing.T, p localPlan) {
				if p.jobs != 3 {
					t.Errorf("jobs = %d", p.jobs)
				}
			},
		},
		{name: "bad platform", opts: localBuildOptions{platforms: []string{"linux/aarch64"}}, wantErr: `use "arm64"`},
		{name: "duplicate platform", opts: localBuildOptions{platforms: []string{"linux/arm64", "linux/arm64/v8"}}, wantErr: "same platform"},
		{name: "allow-fail not built", opts: localBuildOptions{platforms: []string{"linux/amd64"}, allowFail: []string{"linux/s390x"}}, wantErr: "not one of the platforms"},
		{name: "digest output", opts: localBuildOptions{tag: "r.example.com/app@sha256:" + strings.Repeat("a", 64)}, wantErr: "--tag"},
		{name: "bad format", opts: localBuildOptions{format: "v2s1"}, wantErr: "--format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planLocalBuild(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func TestPlatformStatuses(t *testing.T) {
	results := []platformResult{
		{platform: "linux/amd64", tag: "r/app:v1-linux-amd64", out: imagebuild.Output{Image: imagebuild.Image{Digest: "sha256:a"}}},
		{platform: "linux/s390x", err: &imagebuild.StageError{Stage: imagebuild.StageBuild, Err: errors.New("exit status 1")}},
	}
	got := platformStatuses(results)
	if got[0].Phase != buildv1.BuildPhaseComplete || got[0].Output == nil || got[0].Output.ImageDigest != "sha256:a" || got[0].OutputDockerImageReference != "r/app:v1-linux-amd64" {
		t.Errorf("complete entry %+v", got[0])
	}
	if got[1].Phase != buildv1.BuildPhaseFailed || got[1].Reason != buildv1.StatusReasonDockerBuildFailed || !strings.Contains(got[1].Message, "exit status 1") {
		t.Errorf("failed entry %+v", got[1])
	}
}

func TestImageLabels(t *testing.T) {
	b := &buildv1.Build{}
	b.Name, b.Namespace = "app-7", "team"
	b.Spec.Source = buildv1.BuildSource{Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git", Ref: "main"}, ContextDir: "web"}
	b.Spec.Output.ImageLabels = []buildv1.ImageLabel{{Name: "team", Value: "blue"}, {Name: labelBuildName, Value: "override"}}
	rev := &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{
		Commit: "abc123", Author: buildv1.SourceControlUser{Name: "Ada", Email: "ada@example.com"}, Message: "fix it"}}
	want := map[string]string{
		labelBuildName:        "override",
		labelBuildNamespace:   "team",
		labelSourceLocation:   "https://git.example.com/app.git",
		labelCommitRef:        "main",
		labelSourceContextDir: "web",
		labelCommitID:         "abc123",
		labelCommitAuthor:     "Ada <ada@example.com>",
		labelCommitMessage:    "fix it",
		"team":                "blue",
	}
	if got := imageLabels(b, rev); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestBuildArgsAndEnv(t *testing.T) {
	vars := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}}
	args, err := buildArgs(vars)
	if err != nil || !reflect.DeepEqual(args, map[string]string{"A": "1", "B": ""}) {
		t.Errorf("buildArgs = %v, %v", args, err)
	}
	env, err := buildEnv(vars)
	if err != nil || !reflect.DeepEqual(env, []string{"A=1", "B="}) {
		t.Errorf("buildEnv = %v, %v", env, err)
	}
	unresolved := []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{}}}
	if _, err := buildArgs(unresolved); statusReason(err) != buildv1.StatusReasonUnresolvableEnvironmentVariable {
		t.Errorf("buildArgs with valueFrom: %v", err)
	}
	if _, err := buildEnv(unresolved); statusReason(err) != buildv1.StatusReasonUnresolvableEnvironmentVariable {
		t.Errorf("buildEnv with valueFrom: %v", err)
	}
}

func TestOutputReference(t *testing.T) {
	tests := []struct {
		out        buildv1.BuildOutput
		want       string
		wantReason buildv1.StatusReason
	}{
		{out: buildv1.BuildOutput{}, want: ""},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "r.example.com/app:v1-linux-arm64"}}, want: "r.example.com/app:v1-linux-arm64"},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "app:v1"}}, wantReason: buildv1.StatusReasonInvalidOutputReference},
		{out: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "Not A Ref"}}, wantReason: buildv1.StatusReasonInvalidOutputReference},
	}
	for _, tt := range tests {
		got, err := outputReference(tt.out)
		if tt.wantReason != "" {
			if statusReason(err) != tt.wantReason {
				t.Errorf("outputReference(%+v) err = %v, want %s", tt.out.To, err, tt.wantReason)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("outputReference(%+v) = %q, %v", tt.out.To, got, err)
		}
	}
}

func TestTargetPlatform(t *testing.T) {
	b := &buildv1.Build{}
	if p, err := targetPlatform(b); err != nil || p.String() != "" {
		t.Errorf("classic: %v %v", p, err)
	}
	b.Spec.Platforms = []string{"linux/arm64"}
	if p, err := targetPlatform(b); err != nil || p.String() != "linux/arm64" {
		t.Errorf("one: %v %v", p, err)
	}
	b.Spec.Platforms = []string{"linux/arm64", "linux/amd64"}
	if _, err := targetPlatform(b); err == nil {
		t.Error("two platforms accepted")
	}
}

func TestIsMountPoint(t *testing.T) {
	if !isMountPoint("/proc") {
		t.Error("/proc is not a mount point")
	}
	if isMountPoint(t.TempDir()) {
		t.Error("a temporary directory is a mount point")
	}
	if isMountPoint("/nonexistent/archway") {
		t.Error("a missing directory is a mount point")
	}
}

func TestRunMounts(t *testing.T) {
	volumes := []buildv1.BuildVolume{
		{Name: "certs", Mounts: []buildv1.BuildVolumeMount{{DestinationPath: "/etc/pki/extra"}, {DestinationPath: "/certs"}}},
		{Name: "settings", Mounts: []buildv1.BuildVolumeMount{{DestinationPath: "/etc/app"}}},
	}
	want := []string{"/v/certs:/etc/pki/extra:ro", "/v/certs:/certs:ro", "/v/settings:/etc/app:ro"}
	if got := runMounts(volumes, "/v"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
