package image

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/openshift/imagebuilder"
	"github.com/openshift/imagebuilder/dockerfile/parser"
	"go.podman.io/image/v5/docker/reference"

	"github.com/archway-build/archway/pkg/platform"
)

// baseImage is an image a Dockerfile's FROM instruction pulls.
type baseImage struct {
	// Ref is the image reference with ARG values expanded.
	Ref string
	// Line is the FROM instruction's line in the Dockerfile.
	Line int
	// Platform is the platform of the FROM's own --platform flag, with
	// ARGs expanded and normalized; empty for the target platform.
	Platform string
	// Stage is the index of the stage the FROM begins (of the first such
	// FROM, for an image several pull).
	Stage int
}

// pinKey is how pinBases finds a base's digest: its reference, and the
// platform of its FROM's --platform flag, if any.
func pinKey(ref, platform string) string {
	if platform == "" {
		return ref
	}
	return ref + " --platform=" + platform
}

// baseImages returns the images the FROM instructions of dockerfile pull
// when built for the target platform, in order and without duplicates:
// stage names, scratch, and FROMs with a --platform flag of their own (they
// pull for another platform, usually $BUILDPLATFORM) are left out, as are
// references whose ARGs have no value. ARGs are expanded from the ARG
// instructions before the first FROM, overridden by args (the build args
// and the TARGET*/BUILD* platform args).
func baseImages(dockerfile []byte, args map[string]string) ([]baseImage, error) {
	found, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	return uniqueBases(found.bases), nil
}

// uniqueBases returns the images froms pull, once each.
func uniqueBases(froms []baseFrom) []baseImage {
	seen := map[string]bool{}
	var out []baseImage
	for _, f := range froms {
		if k := pinKey(f.ref, f.platform); !seen[k] {
			seen[k] = true
			out = append(out, baseImage{Ref: f.ref, Line: f.node.StartLine, Platform: f.platform, Stage: f.stage})
		}
	}
	return out
}

// baseFrom is a FROM instruction that pulls a base image, ref, for the
// target platform or, with a --platform flag, for platform.
type baseFrom struct {
	node     *parser.Node
	ref      string
	platform string
	stage    int // the index of the stage the FROM begins
}

// registryRefs returns every image reference dockerfile names when built
// with args, without duplicates: the bases baseImages returns and the other
// images the build pulls (see dockerfileImages). A build reaches the
// registries of all of them, so their settings (a loopback registry reached
// without TLS, say) must cover each, not just the bases it keys.
func registryRefs(dockerfile []byte, args map[string]string) ([]string, error) {
	found, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	refs := make([]string, 0, len(found.bases)+len(found.platformed)+len(found.others))
	for _, b := range slices.Concat(found.bases, found.platformed) {
		refs = append(refs, b.ref)
	}
	refs = append(refs, found.others...)
	slices.Sort(refs)
	return slices.Compact(refs), nil
}

// imageRefs are the images a Dockerfile pulls, as dockerfileImages tells
// them.
type imageRefs struct {
	// bases are the FROM instructions that pull a base image for the
	// target platform (see baseImages).
	bases []baseFrom
	// platformed are those that pull one for the platform of their own
	// --platform flag, when that platform is told as buildah tells it (see
	// fromPlatform).
	platformed []baseFrom
	// others are the other images the build pulls: those (not stages) a
	// COPY or ADD --from or a RUN --mount's from= names, and those of FROMs
	// whose platform is not told.
	others []string
	// stages are the stages' names by index ("" for one without).
	stages []string
	// unknown says the Dockerfile names an image, a stage or a platform
	// that cannot be told the way buildah tells it (an ARG without a
	// value here, a stage name with an ARG, several --platform flags): a
	// key cannot name what it pulls.
	unknown bool
}

// unkeyed says the build pulls an image no key can name.
func (r imageRefs) unkeyed() bool { return r.unknown || len(r.others) > 0 }

// dockerfileImages walks dockerfile as buildah reads it with args (the
// build args and the TARGET*/BUILD* platform args buildah defines): FROM
// lines and their --platform flags are expanded with the ARGs before the
// first FROM, their values overridden by args, and then the platform args
// not declared there; --from and from= values with the ARGs their stage
// declares (a global ARG only when redeclared). Stage names are matched
// exactly, by name or index, as buildah matches them.
func dockerfileImages(dockerfile []byte, args map[string]string) (imageRefs, error) {
	var out imageRefs
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return out, fmt.Errorf("parsing the Dockerfile: %w", err)
	}
	globals := map[string]string{}
	var order []string
	setGlobal := func(name, value string) {
		if _, seen := globals[name]; !seen {
			order = append(order, name)
		}
		globals[name] = value
	}
	sawFrom := false
	// stages are the stages before the current one (named current), by
	// name; stageCount is how many there are.
	stages := map[string]bool{}
	stageCount := 0
	current := ""
	// locals are the ARGs the current stage declared, with their values.
	var locals map[string]string
	var localOrder []string
	isStage := func(name string) bool {
		// An index as buildah writes it: "00" is an image.
		n, err := strconv.Atoi(name)
		return stages[name] || (err == nil && strconv.Itoa(n) == name && n >= 0 && n < stageCount)
	}
	// other notes the image a --from or from= value names, if it names
	// no stage.
	other := func(value string) {
		if value == "" || isStage(value) {
			out.unknown = out.unknown || value == ""
			return
		}
		ref, err := imagebuilder.ProcessWord(value, environment(localOrder, locals))
		switch {
		case err != nil || ref == "" || strings.Contains(ref, "$"):
			out.unknown = true
		case !isStage(ref):
			out.others = append(out.others, ref)
		}
	}
	for _, node := range root.Children {
		switch strings.ToLower(node.Value) {
		case "arg":
			for n := node.Next; n != nil; n = n.Next {
				name, value, hasValue := strings.Cut(n.Value, "=")
				if sawFrom {
					// A stage's ARG: the build arg, else its default,
					// else the global of that name.
					switch v, ok := args[name]; {
					case ok:
						value = v
					case hasValue:
						if expanded, err := imagebuilder.ProcessWord(value, environment(localOrder, locals)); err == nil {
							value = expanded
						}
					default:
						value, hasValue = globals[name]
						if !hasValue {
							continue
						}
					}
					if _, seen := locals[name]; !seen {
						localOrder = append(localOrder, name)
					}
					locals[name] = value
					continue
				}
				if v, ok := args[name]; ok {
					setGlobal(name, v)
					continue
				}
				if hasValue {
					// buildah expands a default with its platform args too,
					// which this walk does not: such a default is not told.
					if mentionsPlatformArg(value) {
						out.unknown = true
					}
					if expanded, err := imagebuilder.ProcessWord(value, environment(order, globals)); err == nil {
						value = expanded
					}
					setGlobal(name, value)
				}
			}
		case "from":
			// The stage before this one counts from here on, by name and
			// index; a stage's own name in its instructions names an
			// image, as buildah looks names up among earlier stages only.
			if sawFrom {
				if current != "" {
					stages[current] = true
				}
				stageCount++
			}
			sawFrom = true
			current = ""
			locals, localOrder = map[string]string{}, nil
			words := nodeWords(node)
			// A --platform value is told by fromPlatform; any other flag
			// with what buildah expands or unquotes may be one.
			if len(words) == 0 || slices.ContainsFunc(node.Flags, func(f string) bool {
				return strings.ContainsAny(f, flagSpecials) && !strings.HasPrefix(f, "--platform=")
			}) {
				out.unknown = true
				out.stages = append(out.stages, "")
				break
			}
			if len(words) >= 3 && strings.EqualFold(words[1], "as") && strings.Contains(words[2], "$") {
				out.unknown = true // buildah expands stage names; this walk does not
			}
			ref, known := expandImage(words[0], args, order, globals)
			switch {
			case !known:
				out.unknown = true
			case ref == "" || isStage(ref):
				// scratch, or a stage
			case !hasFlag(node, "platform"):
				out.bases = append(out.bases, baseFrom{node: node, ref: ref, stage: stageCount})
			default:
				if p, ok := fromPlatform(node, args, globals); ok {
					out.platformed = append(out.platformed, baseFrom{node: node, ref: ref, platform: p, stage: stageCount})
				} else {
					out.others = append(out.others, ref)
				}
			}
			if len(words) >= 3 && strings.EqualFold(words[1], "as") {
				current = words[2]
			}
			out.stages = append(out.stages, current)
		case "copy", "add":
			for _, f := range node.Flags {
				if strings.ContainsAny(f, flagSpecials) {
					out.unknown = true // buildah expands and unquotes it first
				}
				if from, ok := strings.CutPrefix(strings.TrimPrefix(f, "--"), "from="); ok {
					other(from)
				}
			}
		case "run":
			for _, f := range node.Flags {
				if strings.ContainsAny(f, flagSpecials) {
					out.unknown = true // buildah expands and unquotes it first
					continue
				}
				if mount, ok := strings.CutPrefix(strings.TrimPrefix(f, "--"), "mount="); ok {
					if m := parseMount(mount); m.from != "" {
						other(m.from)
					}
				}
			}
		}
	}
	return out, nil
}

// builtinArgRef finds a reference to an arg buildah defines without an ARG
// instruction: the platform args and the proxy args.
var builtinArgRef = regexp.MustCompile(`\$\{?((TARGET|BUILD)(PLATFORM|OS|ARCH|VARIANT)|(?i:(HTTP|HTTPS|FTP|NO|ALL)_PROXY))\b`)

// mentionsPlatformArg says whether word refers to one of the args buildah
// defines itself (the platform args, the proxy args).
func mentionsPlatformArg(word string) bool { return builtinArgRef.MatchString(word) }

// fromPlatform returns the platform of a FROM instruction's --platform
// flag, normalized (linux/arm64/v8 is linux/arm64), when it is told as
// buildah tells it: one flag, whose value is a platform written out or is
// exactly $BUILDPLATFORM or $TARGETPLATFORM, which no ARG before the first
// FROM declares (buildah's own value then comes first) and which args
// (holding buildah's values) has. An arm platform needs its variant
// written: without one, an index's first arm image is pulled, whichever
// that is.
func fromPlatform(node *parser.Node, args map[string]string, globals map[string]string) (string, bool) {
	var values []string
	for _, f := range node.Flags {
		if value, found := strings.CutPrefix(strings.TrimPrefix(f, "--"), "platform="); found {
			values = append(values, value)
		}
	}
	if len(values) != 1 {
		return "", false
	}
	value := values[0]
	switch value {
	case "$BUILDPLATFORM", "${BUILDPLATFORM}", "$TARGETPLATFORM", "${TARGETPLATFORM}":
		name := strings.Trim(value, "${}")
		if _, declared := globals[name]; declared {
			return "", false
		}
		if value = args[name]; value == "" {
			return "", false
		}
	default:
		if strings.ContainsAny(value, "$") {
			return "", false
		}
	}
	p, err := platform.Parse(value)
	if err != nil || (p.Architecture == "arm" && p.Variant == "") {
		return "", false
	}
	return p.Normalize().String(), true
}

// expandImage expands the ARGs of an image reference word of a FROM: the
// global ARGs, then the platform args a builder defines without an ARG
// instruction. known is false for a reference with an ARG that has no
// value or that expands to nothing; ref is empty for scratch.
func expandImage(word string, args map[string]string, order []string, globals map[string]string) (ref string, known bool) {
	env := environment(order, globals)
	for name, value := range args {
		if _, declared := globals[name]; !declared && isPlatformArg(name) {
			env = append(env, name+"="+value)
		}
	}
	ref, err := imagebuilder.ProcessWord(word, env)
	if err != nil || ref == "" || strings.Contains(ref, "$") {
		return "", false
	}
	if strings.EqualFold(ref, "scratch") {
		return "", true
	}
	return ref, true
}

// isPlatformArg reports whether name is one of the ARGs a builder defines
// for every FROM without an ARG instruction.
func isPlatformArg(name string) bool {
	switch name {
	case "TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT",
		"BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT":
		return true
	}
	return false
}

// environment formats values as KEY=VALUE in declaration order.
func environment(order []string, values map[string]string) []string {
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+values[name])
	}
	return env
}

// nodeWords returns an instruction's arguments.
func nodeWords(node *parser.Node) []string {
	var words []string
	for n := node.Next; n != nil; n = n.Next {
		words = append(words, n.Value)
	}
	return words
}

// hasFlag reports whether an instruction has --name or --name=value.
func hasFlag(node *parser.Node, name string) bool {
	for _, f := range node.Flags {
		f = strings.TrimPrefix(f, "--")
		if f == name || strings.HasPrefix(f, name+"=") {
			return true
		}
	}
	return false
}

// pinBases returns dockerfile with the image of every FROM instruction
// that pulls a base image in digests (by pinKey of its reference with ARGs
// expanded from args, as dockerfileImages has it, and its
// --platform) replaced by that image's repository and digest, keeping the
// instruction's flags and stage name: the build then pulls the very
// manifest its result key names, whatever the tag names meanwhile.
func pinBases(dockerfile []byte, args map[string]string, digests map[string]string) ([]byte, error) {
	found, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	froms := slices.Concat(found.bases, found.platformed)
	slices.SortFunc(froms, func(a, b baseFrom) int { return a.node.StartLine - b.node.StartLine })
	lines := strings.SplitAfter(string(dockerfile), "\n")
	// From the last FROM to the first, so that earlier line numbers hold.
	for i := len(froms) - 1; i >= 0; i-- {
		f := froms[i]
		dgst, ok := digests[pinKey(f.ref, f.platform)]
		if !ok {
			continue
		}
		named, err := reference.ParseNormalizedNamed(f.ref)
		if err != nil {
			return nil, fmt.Errorf("base image %q: %w", f.ref, err)
		}
		pinned, err := reference.WithDigest(reference.TrimNamed(named), digest.Digest(dgst))
		if err != nil {
			return nil, fmt.Errorf("base image %q: %w", f.ref, err)
		}
		instruction := "FROM"
		for _, flag := range f.node.Flags {
			instruction += " " + flag
		}
		instruction += " " + pinned.String()
		if words := nodeWords(f.node); len(words) >= 3 && strings.EqualFold(words[1], "as") {
			instruction += " AS " + words[2]
		}
		start, end := f.node.StartLine-1, f.node.EndLine
		if start < 0 || end > len(lines) || start >= end {
			return nil, fmt.Errorf("the Dockerfile's FROM is at lines %d-%d of %d", f.node.StartLine, f.node.EndLine, len(lines))
		}
		lines = slices.Concat(lines[:start], []string{instruction + "\n"}, lines[end:])
	}
	return []byte(strings.Join(lines, "")), nil
}

// replaceLastFrom returns dockerfile with the image of its last FROM
// instruction replaced by image, keeping the instruction's flags and stage
// name: what OpenShift does with a Docker strategy's from.
func replaceLastFrom(dockerfile []byte, image string) ([]byte, error) {
	// The image is written into the Dockerfile: a space, newline or escape
	// in it would add flags or instructions.
	if image == "" || strings.ContainsFunc(image, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return nil, fmt.Errorf("the image %q of the strategy's from is not an image reference", image)
	}
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return nil, fmt.Errorf("parsing the Dockerfile: %w", err)
	}
	var last *parser.Node
	for _, node := range root.Children {
		if strings.EqualFold(node.Value, "from") {
			last = node
		}
	}
	if last == nil {
		return nil, fmt.Errorf("the Dockerfile has no FROM instruction")
	}
	instruction := "FROM"
	for _, f := range last.Flags {
		instruction += " " + f
	}
	instruction += " " + image
	if words := nodeWords(last); len(words) >= 3 && strings.EqualFold(words[1], "as") {
		instruction += " AS " + words[2]
	}
	lines := strings.SplitAfter(string(dockerfile), "\n")
	start, end := last.StartLine-1, last.EndLine
	if start < 0 || end > len(lines) || start >= end {
		return nil, fmt.Errorf("the Dockerfile's last FROM is at lines %d-%d of %d", last.StartLine, last.EndLine, len(lines))
	}
	var out strings.Builder
	for _, l := range lines[:start] {
		out.WriteString(l)
	}
	out.WriteString(instruction + "\n")
	for _, l := range lines[end:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

// stagesUpTo returns the images of bases that the stages up to target (by
// name, as buildah's --target names it) pull: the later stages are not
// built. All of them when target is empty or names no stage.
func stagesUpTo(bases []baseImage, stageNames []string, target string) []baseImage {
	last := slices.Index(stageNames, target)
	if target == "" || last < 0 {
		return bases
	}
	return slices.DeleteFunc(slices.Clone(bases), func(b baseImage) bool { return b.Stage > last })
}
