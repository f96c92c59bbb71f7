package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

const header = "apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\n"

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr []string // every substring must be in the error
		check   func(t *testing.T, cfg *BuildControllerConfiguration)
	}{
		{
			name: "minimal file takes the defaults",
			file: header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n",
			check: func(t *testing.T, cfg *BuildControllerConfiguration) {
				b := cfg.Build
				if b.BuilderServiceAccount != "builder" || !ptr.Deref(b.BuildOverrides.ArchNodeSelector, false) ||
					!ptr.Deref(b.BuildOverrides.ManifestList, false) {
					t.Errorf("defaults not applied: %+v", b)
				}
			},
		},
		{
			name: "imageChangeTrigger polls every 5m by default",
			file: header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n",
			check: func(t *testing.T, cfg *BuildControllerConfiguration) {
				if d := cfg.Build.ImageChangeTrigger.PollInterval; d == nil || d.Duration != 5*time.Minute {
					t.Errorf("pollInterval = %v", d)
				}
			},
		},
		{
			name:    "imageChangeTrigger polling too often",
			file:    header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n  imageChangeTrigger: {pollInterval: 100ms}\n",
			wantErr: []string{"build.imageChangeTrigger.pollInterval: Invalid value: \"100ms\": must be at least 1s"},
		},
		{
			name: "trustedCA takes OpenShift's key by default",
			file: header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n  trustedCA: {configMapName: trusted-ca}\n",
			check: func(t *testing.T, cfg *BuildControllerConfiguration) {
				if ca := cfg.Build.TrustedCA; ca == nil || ca.ConfigMapName != "trusted-ca" || ca.Key != "ca-bundle.crt" {
					t.Errorf("trustedCA = %+v", ca)
				}
			},
		},
		{
			name:    "trustedCA without a ConfigMap",
			file:    header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n  trustedCA: {key: ca.crt}\n",
			wantErr: []string{"build.trustedCA.configMapName: Required value"},
		},
		{
			name:    "trustedCA with a bad key",
			file:    header + "build:\n  builderImage: registry.example.com/archway/builder:v1\n  trustedCA: {configMapName: ca, key: a/b}\n",
			wantErr: []string{"build.trustedCA.key: Invalid value"},
		},
		{
			name: "every field",
			file: header + `build:
  builderImage: registry.example.com/archway/builder:v1
  builderServiceAccount: builder
  platformBuilderImages:
  - {platform: linux/s390x, image: registry.example.com/archway/builder-s390x:v1}
  buildDefaults:
    env: [{name: HTTP_PROXY, value: http://proxy:3128}]
    labels: {team: a}
    annotations: {example.com/a: b}
    nodeSelector: {node-role.kubernetes.io/builder: ""}
    resources: {requests: {cpu: 500m}, limits: {cpu: "2"}}
    imageLabels: [{name: vendor, value: acme}]
    platforms: [linux/amd64, linux/arm64]
  buildOverrides:
    forcePull: true
    imageLabels: [{name: built-by, value: archway}]
    nodeSelector: {pool: builds}
    tolerations: [{key: dedicated, operator: Equal, value: builds, effect: NoSchedule}]
    annotations: {example.com/c: d}
    labels: {billing: builds}
    platforms: [linux/amd64]
    archNodeSelector: false
    manifestList: false
`,
			check: func(t *testing.T, cfg *BuildControllerConfiguration) {
				o := cfg.Build.BuildOverrides
				if ptr.Deref(o.ArchNodeSelector, true) || ptr.Deref(o.ManifestList, true) || !o.ForcePull ||
					len(o.Tolerations) != 1 || cfg.Build.BuildDefaults.Resources.Requests.Cpu().MilliValue() != 500 {
					t.Errorf("fields not read: %+v", cfg.Build)
				}
			},
		},
		{name: "wrong kind", file: "apiVersion: config.archway.dev/v1alpha1\nkind: Nope\nbuild: {builderImage: x}\n", wantErr: []string{"kind"}},
		{name: "wrong apiVersion", file: "apiVersion: v1\nkind: BuildControllerConfiguration\nbuild: {builderImage: x}\n", wantErr: []string{"apiVersion"}},
		{name: "missing builder image", file: header, wantErr: []string{"build.builderImage: Required value"}},
		{name: "bad builder image", file: header + "build: {builderImage: 'registry/app:bad tag'}\n", wantErr: []string{"build.builderImage: Invalid value"}},
		{name: "unknown field names it", file: header + "build: {builderImage: x, buidlerImage: y}\n", wantErr: []string{"buidlerImage"}},
		{name: "unfitNodes without a label key", file: header + "build: {builderImage: x, unfitNodes: {values: [yes]}}\n",
			wantErr: []string{"build.unfitNodes.labelKey: Required value"}},
		{name: "unfitNodes with a bad key and value", file: header + "build: {builderImage: x, unfitNodes: {labelKey: 'a b', values: ['c d']}}\n",
			wantErr: []string{"build.unfitNodes.labelKey: Invalid value", "build.unfitNodes.values[0]: Invalid value"}},
		{
			name:    "bad platform names the index and says what to write",
			file:    header + "build:\n  builderImage: x\n  buildOverrides:\n    platforms: [linux/amd64, linux/aarch64]\n",
			wantErr: []string{"build.buildOverrides.platforms[1]", `use "arm64"`},
		},
		{
			name:    "duplicate platform after normalization",
			file:    header + "build:\n  builderImage: x\n  buildDefaults:\n    platforms: [linux/arm64, linux/arm64/v8]\n",
			wantErr: []string{"build.buildDefaults.platforms[1]: Duplicate value"},
		},
		{
			name:    "per-platform image with a bad platform",
			file:    header + "build:\n  builderImage: x\n  platformBuilderImages: [{platform: linux, image: y}]\n",
			wantErr: []string{"build.platformBuilderImages[0].platform"},
		},
		{
			name:    "override of kubernetes.io/os",
			file:    header + "build:\n  builderImage: x\n  buildOverrides:\n    nodeSelector: {kubernetes.io/os: windows}\n",
			wantErr: []string{"build.buildOverrides.nodeSelector[kubernetes.io/os]: Forbidden"},
		},
		{
			name:    "override of a reserved label",
			file:    header + "build:\n  builderImage: x\n  buildOverrides:\n    labels: {openshift.io/build.name: x}\n",
			wantErr: []string{"build.buildOverrides.labels[openshift.io/build.name]: Forbidden"},
		},
		{
			name:    "default env with valueFrom",
			file:    header + "build:\n  builderImage: x\n  buildDefaults:\n    env: [{name: A, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n",
			wantErr: []string{"build.buildDefaults.env[0].valueFrom: Forbidden"},
		},
		{
			name:    "request above limit",
			file:    header + "build:\n  builderImage: x\n  buildDefaults:\n    resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n",
			wantErr: []string{"build.buildDefaults.resources.requests[memory]"},
		},
		{
			name:    "bad toleration",
			file:    header + "build:\n  builderImage: x\n  buildOverrides:\n    tolerations: [{key: a, operator: Exists, value: b}]\n",
			wantErr: []string{"build.buildOverrides.tolerations[0].value"},
		},
		{
			name: "emulation",
			file: header + "build:\n  builderImage: x\n  emulation:\n    platforms:\n    - {platform: linux/arm/v7, hostArchitectures: [amd64, arm64]}\n    - {platform: linux/riscv64, hostArchitectures: [amd64], onRequest: true}\n",
			check: func(t *testing.T, cfg *BuildControllerConfiguration) {
				e := cfg.Build.Emulation.Platforms
				if len(e) != 2 || e[0].HostArchitectures[1] != "arm64" || e[0].OnRequest || !e[1].OnRequest {
					t.Errorf("emulation not read: %+v", e)
				}
			},
		},
		{
			name:    "emulation without host architectures",
			file:    header + "build:\n  builderImage: x\n  emulation:\n    platforms: [{platform: linux/arm/v7}]\n",
			wantErr: []string{"build.emulation.platforms[0].hostArchitectures: Required value"},
		},
		{
			name: "emulation on its own architecture, an unknown one, a duplicate",
			file: header + "build:\n  builderImage: x\n  emulation:\n    platforms: [{platform: linux/arm64, hostArchitectures: [arm64, x86_64, amd64, amd64]}]\n",
			wantErr: []string{"build.emulation.platforms[0].hostArchitectures[0]: Invalid value", "own architecture",
				`hostArchitectures[1]: Unsupported value: "x86_64"`, "hostArchitectures[3]: Duplicate value"},
		},
		{
			name:    "emulation of a duplicate platform and a windows one",
			file:    header + "build:\n  builderImage: x\n  emulation:\n    platforms: [{platform: linux/arm, hostArchitectures: [amd64]}, {platform: linux/arm/v7, hostArchitectures: [amd64]}, {platform: windows/arm64, hostArchitectures: [amd64]}]\n",
			wantErr: []string{"build.emulation.platforms[1].platform: Duplicate value", "only linux platforms"},
		},
		{
			name:    "bad service account",
			file:    header + "build:\n  builderImage: x\n  builderServiceAccount: Not_Valid\n",
			wantErr: []string{"build.builderServiceAccount"},
		},
		{
			name:    "bad layer cache mode",
			file:    header + "build:\n  builderImage: x\n  layerCache: {mode: registry}\n",
			wantErr: []string{`build.layerCache.mode: Unsupported value: "registry": supported values: "Registry", "Disabled"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse succeeded, want an error with %q", tt.wantErr)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(header), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "build.builderImage") {
		t.Fatalf("Load error = %v, want one naming %s and build.builderImage", err, path)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}
