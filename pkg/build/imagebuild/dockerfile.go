package imagebuild

import (
	"bytes"
	"fmt"
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
	froms, err := baseFroms(dockerfile, args)
	if err != nil {
		return nil, err
	}
	return uniqueBases(froms), nil
}

// platformBaseImages returns the images the FROM instructions with a
// --platform flag of their own pull (a cross-compiling stage on
// $BUILDPLATFORM, say), each with that platform, in order and without
// duplicates. A FROM whose platform or reference has an ARG without a
// value, or whose platform does not parse, is left out: dockerfileImages
// counts its image among the others, which no key can see.
func platformBaseImages(dockerfile []byte, args map[string]string) ([]baseImage, error) {
	_, platformed, _, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	return uniqueBases(platformed), nil
}

// uniqueBases returns the images froms pull, once each.
func uniqueBases(froms []baseFrom) []baseImage {
	seen := map[string]bool{}
	var out []baseImage
	for _, f := range froms {
		if k := pinKey(f.ref, f.platform); !seen[k] {
			seen[k] = true
			out = append(out, baseImage{Ref: f.ref, Line: f.node.StartLine, Platform: f.platform})
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
}

// baseFroms returns every FROM instruction of dockerfile that pulls a base
// image (baseImages), in order.
func baseFroms(dockerfile []byte, args map[string]string) ([]baseFrom, error) {
	bases, _, _, err := dockerfileImages(dockerfile, args)
	return bases, err
}

// registryRefs returns every image reference dockerfile names when built
// with args, without duplicates: the bases baseImages returns and the other
// images the build pulls (see dockerfileImages). A build reaches the
// registries of all of them, so their settings (a loopback registry reached
// without TLS, say) must cover each, not just the bases it keys.
func registryRefs(dockerfile []byte, args map[string]string) ([]string, error) {
	bases, platformed, others, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	refs := make([]string, 0, len(bases)+len(platformed)+len(others))
	for _, b := range slices.Concat(bases, platformed) {
		refs = append(refs, b.ref)
	}
	refs = append(refs, others...)
	slices.Sort(refs)
	return slices.Compact(refs), nil
}

// dockerfileImages walks dockerfile with ARGs expanded from its ARG
// instructions before the first FROM, overridden by args. bases are the FROM
// instructions that pull a base image for the target platform (see
// baseImages); platformed those that pull one for the platform of their own
// --platform flag (see platformBaseImages); others are the other images the
// build pulls: those of FROMs whose platform cannot be told (an ARG without
// a value), and those (not stages) that a COPY or ADD --from or a RUN
// --mount's from= names. References whose ARGs have no value are left out
// of all three.
func dockerfileImages(dockerfile []byte, args map[string]string) (bases, platformed []baseFrom, others []string, err error) {
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing the Dockerfile: %w", err)
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
	stages := map[string]bool{}
	stageCount := 0
	// other notes the image a --from or from= value names, if it names
	// no stage (by name or index).
	other := func(value string) {
		if n, err := strconv.Atoi(value); value == "" || stages[strings.ToLower(value)] || (err == nil && n >= 0 && n < stageCount) {
			return
		}
		if ref, ok := expandImage(value, args, order, globals); ok && !stages[strings.ToLower(ref)] {
			others = append(others, ref)
		}
	}
	for _, node := range root.Children {
		switch strings.ToLower(node.Value) {
		case "arg":
			if sawFrom {
				continue
			}
			for n := node.Next; n != nil; n = n.Next {
				name, value, hasValue := strings.Cut(n.Value, "=")
				if v, ok := args[name]; ok {
					setGlobal(name, v)
					continue
				}
				if hasValue {
					if expanded, err := imagebuilder.ProcessWord(value, environment(order, globals)); err == nil {
						value = expanded
					}
					setGlobal(name, value)
				}
			}
		case "from":
			sawFrom = true
			words := nodeWords(node)
			if ref, ok := fromImage(node, words, args, order, globals); ok && !stages[strings.ToLower(ref)] {
				bases = append(bases, baseFrom{node: node, ref: ref})
			} else if len(words) > 0 && hasFlag(node, "platform") && !stages[strings.ToLower(words[0])] {
				ref, refOK := expandImage(words[0], args, order, globals)
				p, platformOK := fromPlatform(node, args, order, globals)
				switch {
				case refOK && platformOK && !stages[strings.ToLower(ref)]:
					platformed = append(platformed, baseFrom{node: node, ref: ref, platform: p})
				case refOK:
					other(words[0])
				}
			}
			// A stage name counts from the next FROM on, as does its
			// index.
			if len(words) >= 3 && strings.EqualFold(words[1], "as") {
				stages[strings.ToLower(words[2])] = true
			}
			stageCount++
		case "copy", "add":
			for _, f := range node.Flags {
				if from, ok := strings.CutPrefix(strings.TrimPrefix(f, "--"), "from="); ok {
					other(from)
				}
			}
		case "run":
			for _, f := range node.Flags {
				mount, ok := strings.CutPrefix(strings.TrimPrefix(f, "--"), "mount=")
				if !ok {
					continue
				}
				for field := range strings.SplitSeq(mount, ",") {
					if from, ok := strings.CutPrefix(strings.TrimSpace(field), "from="); ok {
						other(from)
					}
				}
			}
		}
	}
	return bases, platformed, others, nil
}

// fromPlatform returns the platform of a FROM instruction's --platform
// flag with ARGs expanded, normalized (linux/arm64/v8 is linux/arm64); ok
// is false when an ARG has no value or the platform does not parse.
func fromPlatform(node *parser.Node, args map[string]string, order []string, globals map[string]string) (string, bool) {
	for _, f := range node.Flags {
		value, found := strings.CutPrefix(strings.TrimPrefix(f, "--"), "platform=")
		if !found {
			continue
		}
		expanded, ok := expandImage(value, args, order, globals)
		if !ok {
			return "", false
		}
		p, err := platform.Parse(expanded)
		if err != nil {
			return "", false
		}
		return p.Normalize().String(), true
	}
	return "", false
}

// fromImage returns the image a FROM instruction pulls for the target
// platform, with ARGs expanded; ok is false for scratch, for a FROM with a
// --platform flag, and for a reference with an ARG that has no value.
func fromImage(node *parser.Node, words []string, args map[string]string, order []string, globals map[string]string) (ref string, ok bool) {
	if len(words) == 0 || hasFlag(node, "platform") {
		return "", false
	}
	return expandImage(words[0], args, order, globals)
}

// expandImage expands the ARGs of an image reference word: the global
// ARGs, then the platform args a builder defines without an ARG
// instruction. ok is false for scratch and for a reference with an ARG
// that has no value.
func expandImage(word string, args map[string]string, order []string, globals map[string]string) (ref string, ok bool) {
	env := environment(order, globals)
	for name, value := range args {
		if _, declared := globals[name]; !declared && isPlatformArg(name) {
			env = append(env, name+"="+value)
		}
	}
	ref, err := imagebuilder.ProcessWord(word, env)
	if err != nil || ref == "" || strings.Contains(ref, "$") || strings.EqualFold(ref, "scratch") {
		return "", false
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
// expanded from args, as baseImages and platformBaseImages have it, and its
// --platform) replaced by that image's repository and digest, keeping the
// instruction's flags and stage name: the build then pulls the very
// manifest its result key names, whatever the tag names meanwhile.
func pinBases(dockerfile []byte, args map[string]string, digests map[string]string) ([]byte, error) {
	bases, platformed, _, err := dockerfileImages(dockerfile, args)
	if err != nil {
		return nil, err
	}
	froms := slices.Concat(bases, platformed)
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
