package dockerfile

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// Keyable reports whether everything f builds from can be named by a key
// of its inputs (the Dockerfile, the build context, the base images by
// digest): no instruction reads a URL, an image other than the FROM bases,
// or a mount whose content a key cannot see (see keyableMount), no RUN,
// COPY or ADD flag and no ADD source holds what buildah expands or
// unquotes, and there is no ONBUILD. A FROM with a --platform flag of its
// own is a base like any other (Images tells whether its platform is
// told).
func (f *File) Keyable() bool {
	// stages are the stages before the current one, by name and index:
	// buildah looks a name up among those only, so a stage's own name in
	// its instructions names an image.
	stages := map[string]bool{}
	for _, in := range f.Instructions {
		switch in.Command {
		case "from":
			if prev := in.Stage - 1; prev >= 0 {
				stages[strconv.Itoa(prev)] = true
				if name := f.Stages[prev].Name; name != "" {
					stages[name] = true
				}
			}
		case "run":
			for _, fl := range in.Flags {
				// buildah expands a RUN flag's ARGs and removes its
				// quotes and escapes before reading it: one with any of
				// them may read other than what it says here.
				if !fl.Literal() {
					return false
				}
			}
			for _, m := range in.Mounts {
				if !keyableMount(m, stages) {
					return false
				}
			}
		case "add", "copy":
			for _, fl := range in.Flags {
				// buildah expands and unquotes these flags too, and pulls
				// an image for any flag with --from in it.
				if !fl.Literal() {
					return false
				}
				if fl.Name == "from" && fl.HasValue && !stages[fl.Value] {
					return false
				}
			}
			if in.Command == "add" {
				for _, w := range in.Args {
					// A source buildah expands or unquotes may become a
					// URL it downloads.
					if strings.Contains(w, "://") || strings.HasPrefix(w, "git@") || strings.ContainsAny(w, specials) {
						return false
					}
				}
			}
		case "onbuild":
			return false
		}
	}
	return true
}

// keyableMount reports whether a RUN --mount leaves a step's result to
// what a key sees: a cache (whose content is a cache, as BuildKit and
// buildah's own layer cache take it: they key no step by it) or a tmpfs,
// unseeded or seeded from a stage of stages; or a bind mount of a stage or
// of the build context, whose source ContextSources names (ignored files
// included: buildah binds the context as it is). A mount of an image, a
// secret and an SSH agent are read by the step and not keyed.
func keyableMount(m Mount, stages map[string]bool) bool {
	switch m.Type {
	case "cache", "tmpfs", "bind":
		return m.From == "" || stages[m.From]
	}
	return false
}

// ContextSources returns the paths of the build context that f's COPY and
// ADD instructions and RUN bind mounts of the context read, cleaned and
// relative to the context, or ok false when that cannot be told from the
// Dockerfile alone: a source with a wildcard, a variable, a quote or an
// escape, or the whole context (".", or a bind mount without a source).
func (f *File) ContextSources() (paths []string, ok bool) {
	for _, in := range f.Instructions {
		switch in.Command {
		case "add", "copy":
		case "run":
			// A bind mount of the context reads its source, every file
			// of it: the ignore file leaves nothing out of a mount.
			for _, m := range in.Mounts {
				if m.Type != "bind" || m.From != "" {
					continue
				}
				if strings.ContainsAny(m.Source, "*?["+specials) {
					return nil, false
				}
				clean := strings.TrimPrefix(path.Clean("/"+m.Source), "/")
				if clean == "" {
					return nil, false // the whole context
				}
				paths = append(paths, clean)
			}
			continue
		default:
			continue
		}
		if in.HasFlag("from") {
			continue // a stage (an image is not keyable at all)
		}
		if len(in.Args) < 2 {
			return nil, false
		}
		for _, src := range in.Args[:len(in.Args)-1] {
			// buildah takes every source starting with "<<" for a
			// here-document when the instruction has one, and otherwise
			// for a file of that name (JSON form: COPY ["<<x", "/d"]).
			if strings.HasPrefix(src, "<<") && in.Heredocs {
				continue // its content is in the Dockerfile
			}
			if strings.ContainsAny(src, "*?["+specials) {
				return nil, false
			}
			// buildah resolves a source inside the context: "/a" and
			// "../a" are the context's "a".
			clean := strings.TrimPrefix(path.Clean("/"+src), "/")
			if clean == "" {
				return nil, false
			}
			paths = append(paths, clean)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), true
}
