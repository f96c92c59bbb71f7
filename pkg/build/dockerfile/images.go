package dockerfile

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/archway-build/archway/pkg/platform"
)

// Expander expands the variables of a word with env (KEY=VALUE, the first
// of a name wins) and removes its quotes and escapes, as buildah does with
// imagebuilder.ProcessWord.
type Expander func(word string, env []string) (string, error)

// Literal is the Expander of a reader that links no shell lexer: a word
// with a variable, a quote or an escape is not told, nor one that is not
// UTF-8 (buildah's lexer reads each bad byte as U+FFFD); any other word
// reads as written.
func Literal(word string, _ []string) (string, error) {
	if strings.ContainsAny(word, specials) || !utf8.ValidString(word) {
		return "", fmt.Errorf("%q is not written out", word)
	}
	return word, nil
}

// Images are the images a Dockerfile pulls when built with given args, as
// File.Images tells them.
type Images struct {
	// Stages are the stages' FROMs, in order.
	Stages []StageImage
	// Others are the other images the build pulls: those (not stages) a
	// COPY or ADD --from or a RUN --mount's from= names, and those of
	// FROMs whose platform is not told.
	Others []string
	// Unknown says the Dockerfile names an image, a stage or a platform
	// that cannot be told the way buildah tells it (an ARG without a
	// value here, a stage name with an ARG, several --platform flags): a
	// key cannot name what it pulls.
	Unknown bool
}

// StageImage is what a stage's FROM pulls.
type StageImage struct {
	// Name is the stage's name, by which later stages name it; "" for
	// none (or for a FROM not told).
	Name string
	// Told says the FROM's image is told: every ARG it names has a value
	// and no flag other than --platform may read otherwise.
	Told bool
	// FromStage is the earlier stage the FROM names, or -1.
	FromStage int
	// Ref is the base image the FROM pulls, ARGs expanded: "" for
	// scratch, a stage, or an image not told.
	Ref string
	// PlatformFlag says the FROM has a --platform flag of its own: it
	// pulls for that platform, not the target's.
	PlatformFlag bool
	// Platform is that flag's platform, normalized, when it is told as
	// buildah tells it (see fromPlatform); "" otherwise.
	Platform string
	// Needs are the earlier stages its COPY and ADD --from and RUN
	// --mount from= values name.
	Needs []int
	// StartLine and EndLine are the FROM's lines.
	StartLine, EndLine int
}

// Base is a FROM that pulls a base image.
type Base struct {
	// Ref is the image reference with ARGs expanded.
	Ref string
	// Platform is the platform of the FROM's own --platform flag, with
	// ARGs expanded and normalized; empty for the target platform.
	Platform string
	// Stage is the index of the stage the FROM begins.
	Stage int
	// Line is the FROM's first line in the Dockerfile.
	Line int
}

// Bases returns the FROMs that pull a base image for the target
// platform, one per FROM: not scratch, a stage, an image not told, nor a
// FROM with a --platform flag of its own.
func (im Images) Bases() []Base {
	var out []Base
	for i, s := range im.Stages {
		if s.Ref != "" && !s.PlatformFlag {
			out = append(out, Base{Ref: s.Ref, Stage: i, Line: s.StartLine})
		}
	}
	return out
}

// PlatformBases returns the FROMs that pull a base image for the platform
// of their own --platform flag, when that platform is told.
func (im Images) PlatformBases() []Base {
	var out []Base
	for i, s := range im.Stages {
		if s.Ref != "" && s.PlatformFlag && s.Platform != "" {
			out = append(out, Base{Ref: s.Ref, Platform: s.Platform, Stage: i, Line: s.StartLine})
		}
	}
	return out
}

// Unique returns the images bases pull, once each (an image and a
// platform), with the first FROM that pulls it.
func Unique(bases []Base) []Base {
	type key struct{ ref, platform string }
	seen := map[key]bool{}
	var out []Base
	for _, b := range bases {
		if k := (key{b.Ref, b.Platform}); !seen[k] {
			seen[k] = true
			out = append(out, b)
		}
	}
	return out
}

// UpTo returns the bases of the stages up to last, the stage a build
// stops at (File.TargetStage); all of them when last is negative.
func UpTo(bases []Base, last int) []Base {
	if last < 0 {
		return bases
	}
	return slices.DeleteFunc(slices.Clone(bases), func(b Base) bool { return b.Stage > last })
}

// Refs returns every image reference the build pulls, sorted and without
// duplicates: the bases of every platform and the other images. A build
// reaches the registries of all of them.
func (im Images) Refs() []string {
	refs := slices.Clone(im.Others)
	for _, b := range slices.Concat(im.Bases(), im.PlatformBases()) {
		refs = append(refs, b.Ref)
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

// Unkeyed says the build pulls an image no key can name.
func (im Images) Unkeyed() bool { return im.Unknown || len(im.Others) > 0 }

// Needed returns which stages a build of stage last builds: last and,
// recursively, the stages its FROM, COPY and ADD --from and RUN --mount
// from= name. buildah skips the others.
func (im Images) Needed(last int) []bool {
	needed := make([]bool, len(im.Stages))
	var visit func(i int)
	visit = func(i int) {
		if i < 0 || i >= len(im.Stages) || needed[i] {
			return
		}
		needed[i] = true
		visit(im.Stages[i].FromStage)
		for _, n := range im.Stages[i].Needs {
			visit(n)
		}
	}
	visit(last)
	return needed
}

// TargetStage returns the index of the stage a build with --target
// target stops at, as buildah finds it: the last stage of that name, else
// the stage at that position; -1 when target is empty or names no stage.
func (f *File) TargetStage(target string) int {
	if target == "" {
		return -1
	}
	for i, s := range slices.Backward(f.Stages) {
		// buildah names a stage without a name by its index.
		if s.Name == target || (s.Name == "" && strconv.Itoa(i) == target) {
			return i
		}
	}
	if n, err := strconv.Atoi(target); err == nil && n >= 0 && n < len(f.Stages) {
		return n
	}
	return -1
}

// Images tells the images f pulls when buildah builds it with args (the
// build args and the TARGET*/BUILD* platform args buildah defines),
// expanding words with expand. FROM lines and their --platform flags are
// expanded with the ARGs before the first FROM, their values overridden by
// args, and then the platform args not declared there; --from and from=
// values with the ARGs their stage declares (a global ARG only when
// redeclared). Stage names are matched exactly, by name or index, among
// the earlier stages, as buildah matches them.
func (f *File) Images(args map[string]string, expand Expander) Images {
	var out Images
	globals := map[string]string{}
	var order []string
	setGlobal := func(name, value string) {
		if _, seen := globals[name]; !seen {
			order = append(order, name)
		}
		globals[name] = value
	}
	// names are the names of the stages before the current one, by
	// index ("" for none); current is the current one's.
	var names []string
	current := ""
	// locals are the ARGs the current stage declared, with their values.
	var locals map[string]string
	var localOrder []string
	// stageOf finds the earlier stage a name or an index (as buildah
	// writes it: "00" is an image) names, the last that matches, as
	// buildah finds it.
	stageOf := func(name string) (int, bool) {
		if name == "" {
			return 0, false
		}
		for i, n := range slices.Backward(names) {
			if n == name || strconv.Itoa(i) == name {
				return i, true
			}
		}
		return 0, false
	}
	// other notes the image a --from or from= value names, or the stage.
	other := func(value string) {
		if value == "" {
			out.Unknown = true
			return
		}
		if i, ok := stageOf(value); ok {
			out.need(i)
			return
		}
		ref, err := expand(value, environment(localOrder, locals))
		if err != nil || ref == "" || strings.Contains(ref, "$") {
			out.Unknown = true
			return
		}
		if i, ok := stageOf(ref); ok {
			out.need(i)
			return
		}
		out.Others = append(out.Others, ref)
	}
	for _, in := range f.Instructions {
		switch in.Command {
		case "arg":
			for _, word := range in.Args {
				name, value, hasValue := strings.Cut(word, "=")
				if in.Stage >= 0 {
					// A stage's ARG: the build arg, else its default,
					// else the global of that name.
					switch v, ok := args[name]; {
					case ok:
						value = v
					case hasValue:
						if expanded, err := expand(value, environment(localOrder, locals)); err == nil {
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
					if mentionsBuiltinArg(value) {
						out.Unknown = true
					}
					if expanded, err := expand(value, environment(order, globals)); err == nil {
						value = expanded
					}
					setGlobal(name, value)
				}
			}
		case "from":
			// The stage before this one counts from here on, by name and
			// index; a stage's own name in its instructions names an
			// image, as buildah looks names up among earlier stages only.
			if in.Stage > 0 {
				names = append(names, current)
			}
			current = ""
			locals, localOrder = map[string]string{}, nil
			st := StageImage{FromStage: -1, StartLine: in.StartLine, EndLine: in.EndLine}
			// A --platform value is told by fromPlatform; any other flag
			// with what buildah expands or unquotes may be one.
			if len(in.Args) == 0 || slices.ContainsFunc(in.Flags, func(fl Flag) bool {
				return !fl.Literal() && !strings.HasPrefix(fl.Raw, "--platform=")
			}) {
				out.Unknown = true
				out.Stages = append(out.Stages, st)
				break
			}
			name := in.stageName()
			if strings.Contains(name, "$") {
				out.Unknown = true // buildah expands stage names; this walk does not
			}
			ref, known := expandImage(in.Args[0], args, order, globals, expand)
			st.Told = known
			switch i, isStage := stageOf(ref); {
			case !known:
				out.Unknown = true
			case ref == "":
				// scratch
			case isStage:
				st.FromStage = i
			case !in.HasFlag("platform"):
				st.Ref = ref
			default:
				st.Ref, st.PlatformFlag = ref, true
				if p, ok := fromPlatform(in, args, globals); ok {
					st.Platform = p
				} else {
					out.Others = append(out.Others, ref)
				}
			}
			current = name
			st.Name = name
			out.Stages = append(out.Stages, st)
		case "copy", "add":
			for _, fl := range in.Flags {
				if !fl.Literal() {
					out.Unknown = true // buildah expands and unquotes it first
				}
				if fl.Name == "from" && fl.HasValue {
					other(fl.Value)
				}
			}
		case "run":
			for _, fl := range in.Flags {
				if !fl.Literal() {
					out.Unknown = true // buildah expands and unquotes it first
				}
			}
			for _, m := range in.Mounts {
				if m.Literal && m.From != "" {
					other(m.From)
				}
			}
		}
	}
	return out
}

// need notes that the current (last) stage needs stage i.
func (im *Images) need(i int) {
	if n := len(im.Stages); n > 0 {
		im.Stages[n-1].Needs = append(im.Stages[n-1].Needs, i)
	}
}

// builtinArgRef finds a reference to an arg buildah defines without an ARG
// instruction: the platform args and the proxy args.
var builtinArgRef = regexp.MustCompile(`\$\{?((TARGET|BUILD)(PLATFORM|OS|ARCH|VARIANT)|(?i:(HTTP|HTTPS|FTP|NO|ALL)_PROXY))\b`)

// mentionsBuiltinArg says whether word refers to one of the args buildah
// defines itself (the platform args, the proxy args).
func mentionsBuiltinArg(word string) bool { return builtinArgRef.MatchString(word) }

// fromPlatform returns the platform of a FROM instruction's --platform
// flag, normalized (linux/arm64/v8 is linux/arm64), when it is told as
// buildah tells it: one flag, whose value is a platform written out or is
// exactly $BUILDPLATFORM or $TARGETPLATFORM, which no ARG before the first
// FROM declares (buildah's own value then comes first) and which args
// (holding buildah's values) has. An arm platform needs its variant
// written: without one, an index's first arm image is pulled, whichever
// that is.
func fromPlatform(from Instruction, args map[string]string, globals map[string]string) (string, bool) {
	var values []string
	for _, f := range from.Flags {
		if f.Name == "platform" && f.HasValue {
			values = append(values, f.Value)
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
func expandImage(word string, args map[string]string, order []string, globals map[string]string, expand Expander) (ref string, known bool) {
	env := environment(order, globals)
	for name, value := range args {
		if _, declared := globals[name]; !declared && IsPlatformArg(name) {
			env = append(env, name+"="+value)
		}
	}
	ref, err := expand(word, env)
	if err != nil || ref == "" || strings.Contains(ref, "$") {
		return "", false
	}
	if strings.EqualFold(ref, "scratch") {
		return "", true
	}
	return ref, true
}

// IsPlatformArg reports whether name is one of the ARGs a builder defines
// for every FROM without an ARG instruction.
func IsPlatformArg(name string) bool {
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
