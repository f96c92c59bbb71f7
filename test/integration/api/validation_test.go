package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rulesSkipped is the apiserver's last error when the schema rejects an
// object before its CEL rules run.
const rulesSkipped = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// TestAdmissionRejects creates invalid Builds and BuildConfigs and checks
// the exact errors a user sees: each rule on the types, held by the
// apiserver with no webhook.
func TestAdmissionRejects(t *testing.T) {
	notOSArch := func(i int, s string) string {
		return fmt.Sprintf(`spec.platforms[%d]: Invalid value: %q: %q is not os/arch or os/arch/variant (e.g. linux/arm64)`, i, s, s)
	}
	seventeen := []any{}
	for i := range 17 {
		seventeen = append(seventeen, fmt.Sprintf("linux/arch%d", i))
	}
	cases := []struct {
		name   string
		kinds  []string // default: both
		mutate func(spec map[string]any)
		want   []string
		// schema is true for errors of the OpenAPI schema (types, enums,
		// lengths, counts): with one of those the apiserver skips the CEL
		// rules and says so.
		schema bool
	}{
		// Platforms.
		{
			name:   "os only",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/amd64", "linux/arm64", "linux"} },
			want:   []string{notOSArch(2, "linux")},
		},
		{
			name:   "four parts",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/arm/v7/extra"} },
			want:   []string{notOSArch(0, "linux/arm/v7/extra")},
		},
		{
			name:   "empty part",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/amd64", "/arm64"} },
			want:   []string{notOSArch(1, "/arm64")},
		},
		{
			name:   "uppercase",
			mutate: func(s map[string]any) { s["platforms"] = []any{"Linux/AMD64"} },
			want:   []string{`spec.platforms[0]: Invalid value: "Linux/AMD64": "Linux/AMD64": use lowercase ("linux/amd64")`},
		},
		{
			name:   "spaces",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux / arm64"} },
			want:   []string{`spec.platforms[0]: Invalid value: "linux / arm64": "linux / arm64": remove the spaces ("linux/arm64")`},
		},
		{
			name:   "too long",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/" + fmt.Sprintf("%064d", 0)} },
			want:   []string{"spec.platforms[0]: Too long: may not be more than 63 bytes"},
			schema: true,
		},
		{
			name:   "exact duplicate",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/amd64", "linux/arm64", "linux/amd64"} },
			want:   []string{`spec.platforms: Invalid value: "linux/amd64" is listed twice; remove one of them`},
		},
		{
			name:   "arm64 is arm64/v8",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/arm64", "linux/amd64", "linux/arm64/v8"} },
			want:   []string{`spec.platforms: Invalid value: "linux/arm64/v8" is the same platform as "linux/arm64"; remove one of them`},
		},
		{
			name:   "arm is arm/v7",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/arm/v7", "linux/arm"} },
			want:   []string{`spec.platforms: Invalid value: "linux/arm" is the same platform as "linux/arm/v7"; remove one of them`},
		},
		{
			name:   "amd64 is amd64/v1",
			mutate: func(s map[string]any) { s["platforms"] = []any{"linux/amd64/v1", "linux/amd64/v2", "linux/amd64"} },
			want:   []string{`spec.platforms: Invalid value: "linux/amd64" is the same platform as "linux/amd64/v1"; remove one of them`},
		},
		{
			name: "two repeated platforms",
			mutate: func(s map[string]any) {
				s["platforms"] = []any{"linux/arm64/v8", "linux/arm", "linux/arm64", "linux/arm/v7"}
			},
			want: []string{`spec.platforms: Invalid value: "linux/arm64/v8" and other platforms are listed more than once (compared normalized, linux/arm64 = linux/arm64/v8); list each platform once`},
		},
		{
			name:   "more than 16",
			mutate: func(s map[string]any) { s["platforms"] = seventeen },
			want:   []string{"spec.platforms: Too many: 17: must have at most 16 items"},
			schema: true,
		},
		{
			name: "allowed to fail not in platforms",
			mutate: func(s map[string]any) {
				s["platforms"] = []any{"linux/amd64", "linux/arm64", "linux/s390x"}
				s["platformsAllowedToFail"] = []any{"linux/arm64/v8", "linux/ppc64le"}
			},
			want: []string{`spec.platformsAllowedToFail: Invalid value: "linux/ppc64le" is not in platforms; platformsAllowedToFail must be a subset of platforms`},
		},
		{
			name:   "allowed to fail entry malformed",
			mutate: func(s map[string]any) { delete(s, "platforms"); s["platformsAllowedToFail"] = []any{"arm64"} },
			want:   []string{`spec.platformsAllowedToFail[0]: Invalid value: "arm64": "arm64" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		},

		// Strategy.
		{
			name:   "strategy type missing",
			mutate: func(s map[string]any) { s["strategy"] = map[string]any{"dockerStrategy": map[string]any{}} },
			want:   []string{`spec.strategy.type: Required value`},
			schema: true,
		},
		{
			name:   "custom strategy",
			mutate: func(s map[string]any) { s["strategy"] = map[string]any{"type": "Custom"} },
			want: []string{
				`spec.strategy.type: Unsupported value: "Custom": supported values: "Docker", "Source"`,
			},
			schema: true,
		},
		{
			name:   "source type without sourceStrategy",
			mutate: func(s map[string]any) { s["strategy"] = map[string]any{"type": "Source"} },
			want:   []string{`spec.strategy: Invalid value: type Source needs sourceStrategy, and no dockerStrategy`},
		},
		{
			name: "source: a file:// scripts URL and a source secret's destinationDir out of the working directory",
			mutate: func(s map[string]any) {
				s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{
					"from":    map[string]any{"kind": "DockerImage", "name": "registry.example.com/builders/go:1"},
					"scripts": "file:///var/run/secrets/openshift.io/push",
				}}
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"},
					"secrets": []any{map[string]any{"secret": map[string]any{"name": "npmrc"}, "destinationDir": "app/../../etc"}}}
			},
			want: []string{
				`spec.strategy.sourceStrategy.scripts: Invalid value: "file:///var/run/secrets/openshift.io/push": scripts must be image:///directory/in/the/builder/image or an http(s) URL`,
				`spec.source.secrets: Invalid value: with strategy Source, source.secrets[].destinationDir may hold only letters, digits and . _ - + @ /, ` +
					`and no .. (assemble finds the keys there, mounted for its step alone)`,
			},
		},
		{
			name: "docker type with sourceStrategy",
			mutate: func(s map[string]any) {
				set(s, map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "builder:1"}}, "strategy", "sourceStrategy")
			},
			want: []string{`spec.strategy: Invalid value: type Docker takes dockerStrategy, not sourceStrategy`},
		},
		{
			name: "docker from an image stream",
			mutate: func(s map[string]any) {
				set(s, map[string]any{"kind": "ImageStream", "name": "base"}, "strategy", "dockerStrategy", "from")
			},
			want: []string{`spec.strategy.dockerStrategy.from: Invalid value: kind ImageStream is not supported: use kind DockerImage with an image reference, ` +
				`or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>) or ImageStreamImage (<stream>@<digest>)`},
		},
		{
			name: "source from without name",
			mutate: func(s map[string]any) {
				s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage"}}}
			},
			want: []string{`spec.strategy.sourceStrategy.from.name: Required value: name must be an image reference, e.g. registry.example.com/team/builder:1.0`},
		},
		{
			name:   "unknown image optimization policy",
			mutate: func(s map[string]any) { set(s, "Squash", "strategy", "dockerStrategy", "imageOptimizationPolicy") },
			want: []string{
				`spec.strategy.dockerStrategy.imageOptimizationPolicy: Unsupported value: "Squash": supported values: "None", "SkipLayers", "SkipLayersAndWarn"`,
			},
			schema: true,
		},

		// Source.
		{
			name:   "git type without git",
			mutate: func(s map[string]any) { s["source"] = map[string]any{"type": "Git"} },
			want:   []string{`spec.source: Invalid value: type Git needs git (the repository to clone)`},
		},
		{
			name:   "dockerfile type without dockerfile",
			mutate: func(s map[string]any) { s["source"] = map[string]any{"type": "Dockerfile"} },
			want:   []string{`spec.source: Invalid value: type Dockerfile needs dockerfile (the Dockerfile's text)`},
		},
		{
			name: "git and binary",
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"git": map[string]any{"uri": "https://example.com/a.git"}, "binary": map[string]any{}}
			},
			want: []string{`spec.source: Invalid value: git and binary cannot both be set: a build reads one or the other`},
		},
		{
			name: "git without uri",
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"ref": "main"}}
			},
			want:   []string{`spec.source.git.uri: Required value`},
			schema: true,
		},
		{
			name: "git ref read as an option",
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git", "ref": "--upload-pack=touch /tmp/pwned"}}
			},
			want: []string{`spec.source.git.ref: Invalid value: "--upload-pack=touch /tmp/pwned": ref must not start with "-" (git would read it as an option): name a branch, tag or commit`},
		},
		{
			name: "git uri read as an option",
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "--upload-pack=touch /tmp/pwned"}}
			},
			want: []string{`spec.source.git.uri: Invalid value: "--upload-pack=touch /tmp/pwned": uri must not start with "-" (git would read it as an option): use a URL such as https://git.example.com/team/app.git`},
		},
		{
			name: "git uri of a remote helper",
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "ext::sh -c touch% /tmp/pwned"}}
			},
			want: []string{`spec.source.git.uri: Invalid value: "ext::sh -c touch% /tmp/pwned": uri must not name a git remote helper (<transport>::<address>, such as ext::), which runs commands: use an http(s), ssh or git URL`},
		},
		{
			name:  "revision commit read as an option",
			kinds: []string{"Build"},
			mutate: func(s map[string]any) {
				s["revision"] = map[string]any{"type": "Git", "git": map[string]any{"commit": "--upload-pack=touch /tmp/pwned"}}
			},
			want: []string{`spec.revision.git.commit: Invalid value: "--upload-pack=touch /tmp/pwned": commit must not start with "-" (git would read it as an option): give a commit hash`},
		},
		{
			name:   "image source type",
			mutate: func(s map[string]any) { set(s, "Image", "source", "type") },
			want: []string{
				`spec.source.type: Unsupported value: "Image": supported values: "Git", "Dockerfile", "Binary", "None"`,
			},
			schema: true,
		},

		// Output and the rest of the spec.
		{
			name: "output to an image stream image",
			mutate: func(s map[string]any) {
				set(s, map[string]any{"kind": "ImageStreamImage", "name": "app@sha256:0123"}, "output", "to")
			},
			want: []string{`spec.output.to: Invalid value: kind ImageStreamImage is not supported: use kind DockerImage with an image reference, ` +
				`or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>)`},
		},
		{
			name: "output without kind",
			mutate: func(s map[string]any) {
				set(s, map[string]any{"name": "registry.example.com/app:latest"}, "output", "to")
			},
			want: []string{`spec.output.to: Invalid value: kind is required: use kind DockerImage with an image reference, ` +
				`or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>)`},
		},
		{
			name:   "output without name",
			mutate: func(s map[string]any) { set(s, map[string]any{"kind": "DockerImage"}, "output", "to") },
			want:   []string{`spec.output.to.name: Required value: name must be an image reference, e.g. registry.example.com/team/app:latest`},
		},
		{
			name: "duplicate image label",
			mutate: func(s map[string]any) {
				set(s, []any{map[string]any{"name": "a", "value": "1"}, map[string]any{"name": "a", "value": "2"}}, "output", "imageLabels")
			},
			want: []string{`spec.output.imageLabels[1]: Duplicate value: {"name":"a"}`},
		},
		{
			name:   "post-commit command and script",
			mutate: func(s map[string]any) { s["postCommit"] = map[string]any{"command": []any{"true"}, "script": "true"} },
			want:   []string{`spec.postCommit: Invalid value: set command or script, not both`},
		},
		{
			name: "imageOptimizationPolicy SkipLayers with a registry layer cache",
			mutate: func(s map[string]any) {
				set(s, "SkipLayers", "strategy", "dockerStrategy", "imageOptimizationPolicy")
				set(s, map[string]any{"mode": "Registry"}, "strategy", "dockerStrategy", "layerCache")
			},
			want: []string{`spec.strategy.dockerStrategy: Invalid value: imageOptimizationPolicy SkipLayers squashes the layers ` +
				`the build adds into one, and layerCache mode Registry keeps a layer per step: remove layerCache or set imageOptimizationPolicy None`},
		},
		{
			name: "type Dockerfile with git",
			mutate: func(s map[string]any) {
				set(s, map[string]any{"uri": "https://example.com/a.git"}, "source", "git")
			},
			want: []string{`spec.source: Invalid value: type Dockerfile builds the inline Dockerfile alone: ` +
				`remove git and binary, or set type Git to build the repository with this Dockerfile`},
		},
		{
			name: "type None with a Dockerfile",
			mutate: func(s map[string]any) {
				set(s, "None", "source", "type")
			},
			want: []string{`spec.source: Invalid value: type None builds without a source: remove git, binary and dockerfile, or set the type they need`},
		},
		{
			name: "volume of one type holding another",
			mutate: func(s map[string]any) {
				set(s, []any{map[string]any{"name": "certs", "mounts": []any{map[string]any{"destinationPath": "/certs"}},
					"source": map[string]any{"type": "Secret", "configMap": map[string]any{"name": "certs"}}}},
					"strategy", "dockerStrategy", "volumes")
			},
			want: []string{`spec.strategy.dockerStrategy.volumes[0].source: Invalid value: type Secret takes secret alone: set it, and remove the others`},
		},
		{
			name:   "zero deadline",
			mutate: func(s map[string]any) { s["completionDeadlineSeconds"] = int64(0) },
			want:   []string{`spec.completionDeadlineSeconds: Invalid value: 0: spec.completionDeadlineSeconds in body should be greater than or equal to 1`},
		},

		// BuildConfig only.
		{
			name:  "trigger without its field",
			kinds: []string{"BuildConfig"},
			mutate: func(s map[string]any) {
				s["triggers"] = []any{map[string]any{"type": "ConfigChange"}, map[string]any{"type": "GitHub"}}
			},
			want: []string{`spec.triggers[1]: Invalid value: type GitHub needs the github field`},
		},
		{
			name:  "image change trigger of an image stream image",
			kinds: []string{"BuildConfig"},
			mutate: func(s map[string]any) {
				s["triggers"] = []any{map[string]any{"type": "ImageChange", "imageChange": map[string]any{
					"from": map[string]any{"kind": "ImageStreamImage", "name": "base@sha256:0123"}}}}
			},
			want: []string{`spec.triggers[0].imageChange.from: Invalid value: kind ImageStreamImage is not supported: ` +
				`watch an image in its registry with kind DockerImage and its reference, e.g. registry.example.com/team/base:1.0, ` +
				`or, where the cluster serves OpenShift image streams, an ImageStreamTag (<stream>:<tag>)`},
		},
		{
			name:  "image change trigger with no image to watch",
			kinds: []string{"BuildConfig"},
			mutate: func(s map[string]any) {
				s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"}}
				s["triggers"] = []any{map[string]any{"type": "ImageChange", "imageChange": map[string]any{}}}
			},
			want: []string{`spec.triggers: Invalid value: an ImageChange trigger without imageChange.from watches the strategy's from, ` +
				`or the last FROM of an inline Dockerfile (source.dockerfile): set one of them, or imageChange.from ` +
				`(a Dockerfile read from the Git repository or a binary input is known only inside the build pod)`},
		},
		{
			name:  "webhook without secret",
			kinds: []string{"BuildConfig"},
			mutate: func(s map[string]any) {
				s["triggers"] = []any{map[string]any{"type": "Generic", "generic": map[string]any{"allowEnv": true}}}
			},
			want: []string{`spec.triggers[0].generic: Invalid value: set secretReference (a Secret holding the key WebHookSecretKey), or the deprecated secret`},
		},
		{
			name:  "deprecated lowercase trigger type",
			kinds: []string{"BuildConfig"},
			mutate: func(s map[string]any) {
				s["triggers"] = []any{map[string]any{"type": "github", "github": map[string]any{"secret": "x"}}}
			},
			want: []string{
				`spec.triggers[0].type: Unsupported value: "github": supported values: "GitHub", "GitLab", "Bitbucket", "Generic", "ImageChange", "ConfigChange"`,
			},
			schema: true,
		},
		{
			name:   "unknown run policy",
			kinds:  []string{"BuildConfig"},
			mutate: func(s map[string]any) { s["runPolicy"] = "Whenever" },
			want: []string{
				`spec.runPolicy: Unsupported value: "Whenever": supported values: "Serial", "SerialLatestOnly", "Parallel"`,
			},
			schema: true,
		},
		{
			name:   "negative history limit",
			kinds:  []string{"BuildConfig"},
			mutate: func(s map[string]any) { s["failedBuildsHistoryLimit"] = int64(-1) },
			want:   []string{`spec.failedBuildsHistoryLimit: Invalid value: -1: spec.failedBuildsHistoryLimit in body should be greater than or equal to 0`},
		},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		kinds := tc.kinds
		if kinds == nil {
			kinds = []string{"Build", "BuildConfig"}
		}
		for _, kind := range kinds {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				g := NewWithT(t)
				spec := validSpec()
				tc.mutate(spec)
				obj := object(kind, ns, fmt.Sprintf("invalid-%d", i), spec)
				err := b.Client.Create(context.Background(), obj, client.FieldValidation("Strict"))
				want := tc.want
				if tc.schema {
					want = append(want, rulesSkipped)
				}
				g.Expect(fieldErrors(err)).To(ConsistOf(want))
			})
		}
	}
}

// TestUnsupportedOpenShiftFieldsAreRejected shows what a user applying an
// OpenShift Build that uses what archway does not have sees, whatever
// field validation the client asks for: the apiserver's default (Warn)
// would drop a field the schema lacks and accept the rest, so each such
// field is refused by a rule naming it.
func TestUnsupportedOpenShiftFieldsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	spec := validSpec()
	set(spec, map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "x"}}, "strategy", "customStrategy")
	set(spec, map[string]any{"jenkinsfile": "node {}"}, "strategy", "jenkinsPipelineStrategy")
	set(spec, []any{map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "y"}}}, "source", "images")
	for _, validation := range []string{"Ignore", "Warn", "Strict"} {
		t.Run(validation, func(t *testing.T) {
			g := NewWithT(t)
			err := b.Client.Create(context.Background(), object("Build", ns, "custom-"+strings.ToLower(validation), spec), client.FieldValidation(validation))
			g.Expect(fieldErrors(err)).To(ConsistOf(
				`spec.source.images: Invalid value: images (content copied from other images into the build context, OpenShift's image source) `+
					`is not supported by archway: copy the files in the Dockerfile instead (COPY --from=<image>)`,
				`spec.strategy.customStrategy: Invalid value: customStrategy (OpenShift's Custom strategy) is not supported by archway: use type Docker`,
				`spec.strategy.jenkinsPipelineStrategy: Invalid value: jenkinsPipelineStrategy (OpenShift's deprecated JenkinsPipeline strategy) `+
					`is not supported by archway: run the pipeline in Jenkins or Tekton, with type Docker builds`,
			))
		})
	}
}

// TestAdmissionAccepts creates valid objects near the rules' edges.
func TestAdmissionAccepts(t *testing.T) {
	sixteen := []any{}
	for i := range 16 {
		sixteen = append(sixteen, fmt.Sprintf("linux/arch%d", i))
	}
	cases := []struct {
		name   string
		kinds  []string // default: both
		mutate func(spec map[string]any)
	}{
		{name: "multi-platform without output (build only)", mutate: func(s map[string]any) { delete(s, "output") }},
		{name: "no platforms (the controller resolves them)", mutate: func(s map[string]any) { delete(s, "platforms") }},
		{name: "allowed to fail without platforms", mutate: func(s map[string]any) {
			delete(s, "platforms")
			s["platformsAllowedToFail"] = []any{"linux/s390x"}
		}},
		{name: "allowed to fail spelled differently", mutate: func(s map[string]any) {
			s["platforms"] = []any{"linux/amd64", "linux/arm64/v8", "linux/arm"}
			s["platformsAllowedToFail"] = []any{"linux/arm64", "linux/arm/v7", "linux/amd64/v1"}
		}},
		{name: "sixteen platforms", mutate: func(s map[string]any) { s["platforms"] = sixteen }},
		{name: "variants of one architecture", mutate: func(s map[string]any) {
			s["platforms"] = []any{"linux/amd64", "linux/amd64/v2", "linux/amd64/v3", "linux/arm/v6", "linux/arm/v7"}
		}},
		{name: "source strategy", mutate: func(s map[string]any) {
			s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{
				"from": map[string]any{"kind": "DockerImage", "name": "registry.example.com/builders/go:1"},
			}}
		}},
		{name: "source strategy: not incremental, image and https scripts, config maps", mutate: func(s map[string]any) {
			s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{
				"from":        map[string]any{"kind": "DockerImage", "name": "registry.example.com/builders/go:1"},
				"incremental": false, "scripts": "https://example.com/s2i/bin",
			}}
			s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"},
				"configMaps": []any{map[string]any{"configMap": map[string]any{"name": "settings"}}}}
		}},
		{name: "source strategy: secrets in the working directory, below it and at an absolute path", mutate: func(s map[string]any) {
			s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{
				"from": map[string]any{"kind": "DockerImage", "name": "registry.example.com/builders/go:1"},
			}}
			s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"},
				"secrets": []any{
					map[string]any{"secret": map[string]any{"name": "npmrc"}},
					map[string]any{"secret": map[string]any{"name": "maven"}, "destinationDir": ".m2/conf..d"},
					map[string]any{"secret": map[string]any{"name": "ca"}, "destinationDir": "/etc/pki/app"},
				}}
		}},
		{name: "source strategy: incremental, image scripts", mutate: func(s map[string]any) {
			s["strategy"] = map[string]any{"type": "Source", "sourceStrategy": map[string]any{
				"from": map[string]any{"kind": "DockerImage", "name": "registry.example.com/builders/go:1"}, "scripts": "image:///usr/libexec/s2i",
				"incremental": true,
			}}
		}},
		{name: "docker type without dockerStrategy", mutate: func(s map[string]any) { s["strategy"] = map[string]any{"type": "Docker"} }},
		{name: "empty node selector", mutate: func(s map[string]any) { s["nodeSelector"] = map[string]any{} }},
		{name: "post-commit script with args", mutate: func(s map[string]any) {
			s["postCommit"] = map[string]any{"script": "make test $1", "args": []any{"-v"}}
		}},
		{name: "imageOptimizationPolicy SkipLayers", mutate: func(s map[string]any) {
			set(s, "SkipLayers", "strategy", "dockerStrategy", "imageOptimizationPolicy")
		}},
		{name: "imageOptimizationPolicy SkipLayersAndWarn, layer cache disabled", mutate: func(s map[string]any) {
			set(s, "SkipLayersAndWarn", "strategy", "dockerStrategy", "imageOptimizationPolicy")
			set(s, map[string]any{"mode": "Disabled"}, "strategy", "dockerStrategy", "layerCache")
		}},
		{name: "imageOptimizationPolicy None with a registry layer cache", mutate: func(s map[string]any) {
			set(s, "None", "strategy", "dockerStrategy", "imageOptimizationPolicy")
			set(s, map[string]any{"mode": "Registry"}, "strategy", "dockerStrategy", "layerCache")
		}},
		{name: "mountTrustedCA", mutate: func(s map[string]any) { s["mountTrustedCA"] = true }},
		{name: "post-commit command", mutate: func(s map[string]any) { s["postCommit"] = map[string]any{"command": []any{"make", "test"}} }},
		{name: "git with an inline Dockerfile", mutate: func(s map[string]any) {
			s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"}, "dockerfile": "FROM x\n"}
		}},
		{name: "every trigger", kinds: []string{"BuildConfig"}, mutate: func(s map[string]any) {
			ref := map[string]any{"secretReference": map[string]any{"name": "hook"}}
			s["triggers"] = []any{
				map[string]any{"type": "GitHub", "github": ref},
				map[string]any{"type": "GitLab", "gitlab": ref},
				map[string]any{"type": "Bitbucket", "bitbucket": ref},
				map[string]any{"type": "Generic", "generic": map[string]any{"secret": "s3cr3t", "allowEnv": true}},
				map[string]any{"type": "ConfigChange"},
				map[string]any{"type": "ImageChange", "imageChange": map[string]any{}},
				map[string]any{"type": "ImageChange", "imageChange": map[string]any{
					"from": map[string]any{"kind": "DockerImage", "name": "registry.example.com/team/tools:1"}, "paused": true}},
			}
		}},
		{name: "image change trigger of the strategy's from", kinds: []string{"BuildConfig"}, mutate: func(s map[string]any) {
			s["source"] = map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/a.git"}}
			set(s, map[string]any{"kind": "DockerImage", "name": "registry.example.com/team/base:1"}, "strategy", "dockerStrategy", "from")
			s["triggers"] = []any{map[string]any{"type": "ImageChange", "imageChange": map[string]any{}}}
		}},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		kinds := tc.kinds
		if kinds == nil {
			kinds = []string{"Build", "BuildConfig"}
		}
		for _, kind := range kinds {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				spec := validSpec()
				tc.mutate(spec)
				obj := object(kind, ns, fmt.Sprintf("valid-%d", i), spec)
				if err := b.Client.Create(context.Background(), obj, client.FieldValidation("Strict")); err != nil {
					t.Fatalf("rejected: %v", err)
				}
			})
		}
	}
}
