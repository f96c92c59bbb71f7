// Package dockerfile reads a Dockerfile once into the model every reader
// of it works from: its instructions with their flags, mounts and the
// variables they name, its stages, and, for given build args, the ARG
// scopes buildah evaluates, the base images and platforms its FROMs pull,
// the other images it pulls, and what of it a key can name (keyability).
// The rules are buildah's, as imagebuildah and imagebuilder apply them;
// where this package cannot tell what buildah will read, it says so
// (Images.Unknown, File.Keyable) rather than guess.
//
// Both sides read it: the builder in the build pods (cache keys, result
// reuse, base image checks and pinning) and build-controller (the base
// images its preflight inspects). So it links the Dockerfile parser alone:
// no buildah, no container storage, no Docker client (cmd/imports_test.go).
// buildah expands words with imagebuilder's shell lexer, which lives in a
// package that links a Docker client: a reader that links it anyway (the
// builder) passes it as an Expander; the controller passes Literal and
// tells only what is written out.
package dockerfile

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/openshift/imagebuilder/dockerfile/parser"
)

// specials are the characters that make a word or flag read other than it
// is written: buildah expands ARGs and ENV values ($) in it and removes
// quotes and escapes.
const specials = "$\\\"'"

// File is a parsed Dockerfile.
type File struct {
	content []byte
	// Instructions are the Dockerfile's instructions in order, those
	// before the first FROM (its global ARGs) included.
	Instructions []Instruction
	// Stages are its stages, one per FROM, in order.
	Stages []Stage
}

// Instruction is one instruction of a Dockerfile.
type Instruction struct {
	// Command is its name in lower case: "from", "arg", "run", ...
	Command string
	// Stage is the index of the stage it belongs to; -1 before the first
	// FROM.
	Stage int
	// Flags are its flags (--name=value), in order.
	Flags []Flag
	// Args are its arguments as the parser splits them, not expanded.
	Args []string
	// Mounts are a RUN's --mount flags, in order.
	Mounts []Mount
	// Vars are the variables its text names ($NAME, ${NAME...}), in
	// order, each once.
	Vars []string
	// Heredocs says it has here-documents.
	Heredocs bool
	// StartLine and EndLine are its first and last lines, from 1.
	StartLine, EndLine int
}

// Flag is an instruction's flag.
type Flag struct {
	// Raw is the flag as written: "--mount=type=cache,target=/c".
	Raw string
	// Name is what Raw says before its first "=", without the leading
	// "--"; Value is what it says after.
	Name, Value string
	// HasValue says Raw has an "=".
	HasValue bool
}

// Literal reports whether the flag reads as it is written: buildah
// expands the ARGs of an instruction's flags and removes their quotes and
// escapes before it reads them.
func (f Flag) Literal() bool { return !strings.ContainsAny(f.Raw, specials) }

// Mount is what a RUN --mount flag says of where its content comes from.
type Mount struct {
	// Type is its type in lower case; bind when not said, as in Docker
	// and buildah.
	Type string
	// From is the stage or image it mounts; empty for the build context.
	From string
	// Source is the path in From (or the context); empty for its root.
	Source string
	// Literal says its flag reads as written (Flag.Literal).
	Literal bool
}

// ParseMount reads a RUN --mount flag's value (its CSV fields).
func ParseMount(value string) Mount {
	m := Mount{Type: "bind", Literal: !strings.ContainsAny(value, specials)}
	for field := range strings.SplitSeq(value, ",") {
		name, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		switch strings.ToLower(name) {
		case "type":
			m.Type = strings.ToLower(v)
		case "from":
			m.From = v
		case "source", "src":
			m.Source = v
		}
	}
	return m
}

// Stage is a stage of a Dockerfile: its FROM and what follows it.
type Stage struct {
	// Index is its position, from 0.
	Index int
	// Name is the name its FROM gives it after AS, as written; "" for
	// none.
	Name string
	// Image is its FROM's image word as written; "" when there is none.
	Image string
	// From is the index of its FROM in File.Instructions.
	From int
}

// varReference finds the variables a text names: $NAME and ${NAME...}.
var varReference = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// Parse parses a Dockerfile with the parser buildah's imagebuilder uses.
func Parse(content []byte) (*File, error) {
	res, err := parser.Parse(bytes.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("parsing the Dockerfile: %w", err)
	}
	f := &File{content: content}
	stage := -1
	for _, node := range res.AST.Children {
		in := Instruction{
			Command:   strings.ToLower(node.Value),
			Heredocs:  len(node.Heredocs) > 0,
			StartLine: node.StartLine,
			EndLine:   node.EndLine,
		}
		for n := node.Next; n != nil; n = n.Next {
			in.Args = append(in.Args, n.Value)
		}
		for _, raw := range node.Flags {
			name, value, hasValue := strings.Cut(strings.TrimPrefix(raw, "--"), "=")
			in.Flags = append(in.Flags, Flag{Raw: raw, Name: name, Value: value, HasValue: hasValue})
			if in.Command == "run" && name == "mount" && hasValue {
				m := ParseMount(value)
				m.Literal = !strings.ContainsAny(raw, specials)
				in.Mounts = append(in.Mounts, m)
			}
		}
		for _, m := range varReference.FindAllStringSubmatch(node.Original, -1) {
			if !slices.Contains(in.Vars, m[1]) {
				in.Vars = append(in.Vars, m[1])
			}
		}
		if in.Command == "from" {
			stage++
			st := Stage{Index: stage, From: len(f.Instructions)}
			if len(in.Args) > 0 {
				st.Image = in.Args[0]
			}
			st.Name = in.stageName()
			f.Stages = append(f.Stages, st)
		}
		in.Stage = stage
		f.Instructions = append(f.Instructions, in)
	}
	return f, nil
}

// Content returns the Dockerfile as it was parsed.
func (f *File) Content() []byte { return f.content }

// stageName is the name a FROM gives its stage after AS, or "".
func (in Instruction) stageName() string {
	if len(in.Args) >= 3 && strings.EqualFold(in.Args[1], "as") {
		return in.Args[2]
	}
	return ""
}

// HasFlag reports whether the instruction has --name or --name=value.
func (in Instruction) HasFlag(name string) bool {
	for _, f := range in.Flags {
		if f.Name == name {
			return true
		}
	}
	return false
}
