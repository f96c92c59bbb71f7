package main

import (
	"bytes"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
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
				if !reflect.DeepEqual(p.platforms, []string{image.HostPlatform().String()}) || p.jobs != 1 || p.output != "" || p.format != image.FormatOCI {
					t.Errorf("plan %+v", p)
				}
			},
		},
		{
			name: "four platforms, loopback output",
			opts: localBuildOptions{platforms: []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x", "linux/arm/v7"},
				tag: "127.0.0.1:5000/app:v1", allowFail: []string{"linux/s390x"}, format: "docker"},
			check: func(t *testing.T, p localPlan) {
				if p.jobs != maxDefaultJobs || p.output != "127.0.0.1:5000/app:v1" || p.format != image.FormatDocker {
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
		{
			name: "a cache repository per platform",
			opts: localBuildOptions{platforms: []string{"linux/amd64", "linux/arm64/v8"}, cacheRepo: "127.0.0.1:5000/app-cache"},
			check: func(t *testing.T, p localPlan) {
				want := map[string]string{"linux/amd64": "127.0.0.1:5000/app-cache-linux-amd64", "linux/arm64/v8": "127.0.0.1:5000/app-cache-linux-arm64"}
				if !reflect.DeepEqual(p.caches, want) {
					t.Errorf("caches = %v, want %v", p.caches, want)
				}
			},
		},
		{name: "cache repository with a tag", opts: localBuildOptions{cacheRepo: "127.0.0.1:5000/app-cache:v1"}, wantErr: "--cache-repo: cache repository \"127.0.0.1:5000/app-cache:v1\" has a tag or digest"},
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
		{platform: "linux/amd64", tag: "r/app:v1-linux-amd64", out: image.Output{Image: image.Image{Digest: "sha256:a"}}},
		{platform: "linux/s390x", err: &image.StageError{Stage: image.StageBuild, Err: errors.New("exit status 1")}},
		{platform: "linux/arm64", err: &image.StageError{Stage: image.StageBuild, Err: errors.New("signal: killed")},
			cancelledBy: &requiredFailedError{platform: "linux/s390x"}},
	}
	got := platformStatuses(results)
	if got[0].Phase != buildv1.BuildPhaseComplete || got[0].Output == nil || got[0].Output.ImageDigest != "sha256:a" || got[0].OutputDockerImageReference != "r/app:v1-linux-amd64" {
		t.Errorf("complete entry %+v", got[0])
	}
	if got[1].Phase != buildv1.BuildPhaseFailed || got[1].Reason != buildv1.StatusReasonDockerBuildFailed || !strings.Contains(got[1].Message, "exit status 1") {
		t.Errorf("failed entry %+v", got[1])
	}
	if got[2].Phase != buildv1.BuildPhaseCancelled || got[2].Reason != buildv1.StatusReasonCancelledBuild ||
		got[2].Message != "cancelled: linux/s390x, which is not allowed to fail, failed" {
		t.Errorf("cancelled entry %+v", got[2])
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

func TestChooseIsolation(t *testing.T) {
	const hostMap = "         0          0 4294967295\n"
	const userNS = "         0     100000      65536\n"
	found := func(string) (string, error) { return "/usr/sbin/runc", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	tests := []struct {
		name        string
		flag        string
		lookPath    func(string) (string, error)
		euid        int
		uidMap      string
		want        image.Isolation
		wantRuntime string
		wantErr     string
	}{
		{"auto with runc as root", "auto", found, 0, hostMap, image.IsolationOCI, "/usr/sbin/runc", ""},
		{"auto without runc", "auto", missing, 0, hostMap, image.IsolationChroot, "", ""},
		{"auto in a user namespace", "auto", found, 0, userNS, image.IsolationChroot, "", ""},
		{"auto as another user", "", found, 1000, hostMap, image.IsolationChroot, "", ""},
		{"chroot", "chroot", found, 0, hostMap, image.IsolationChroot, "", ""},
		{"oci", "oci", found, 0, hostMap, image.IsolationOCI, "/usr/sbin/runc", ""},
		{"oci without runc", "oci", missing, 0, hostMap, "", "", "--isolation oci needs runc on PATH"},
		{"oci in a user namespace", "oci", found, 0, userNS, "", "", "use --isolation chroot"},
		{"unknown", "vm", found, 0, hostMap, "", "", `--isolation "vm": use auto, oci or chroot`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, runtime, err := chooseIsolation(tt.flag, tt.lookPath, tt.euid, tt.uidMap)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || runtime != tt.wantRuntime {
				t.Errorf("got %q %q %v, want %q %q", got, runtime, err, tt.want, tt.wantRuntime)
			}
		})
	}
}

func TestDisposableStore(t *testing.T) {
	for _, c := range []struct {
		name                    string
		askedWork, askedStorage string
		workDir, storageDir     string
		want                    bool
	}{
		{name: "a build pod's emptyDirs", workDir: podWorkDir, storageDir: podStorageDir, want: true},
		{name: "the store in the pod's work directory", workDir: podWorkDir, want: true},
		{name: "a temporary work directory with the store in it", want: true},
		{name: "a machine's own /var/lib/containers/storage mount", storageDir: podStorageDir},
		{name: "a work directory asked for", askedWork: "/srv/work", workDir: "/srv/work"},
		{name: "a store asked for", askedStorage: "/srv/store", storageDir: "/srv/store"},
		{name: "a work directory asked for beside the pod's store", askedWork: "/srv/work", workDir: "/srv/work", storageDir: podStorageDir},
	} {
		got := disposableStore(dockerBuildOptions{workDir: c.askedWork, storageDir: c.askedStorage}, c.workDir, c.storageDir)
		if got != c.want {
			t.Errorf("%s: disposable %t, want %t", c.name, got, c.want)
		}
	}
}
