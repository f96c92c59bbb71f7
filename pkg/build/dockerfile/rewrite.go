package dockerfile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ReplaceLastFrom returns f with the image of its last FROM instruction
// replaced by image, keeping the instruction's flags and stage name: what
// OpenShift does with a Docker strategy's from.
func (f *File) ReplaceLastFrom(image string) (*File, error) {
	// The image is written into the Dockerfile: a space, newline or escape
	// in it would add flags or instructions.
	if image == "" || strings.ContainsFunc(image, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return nil, fmt.Errorf("the image %q of the strategy's from is not an image reference", image)
	}
	if len(f.Stages) == 0 {
		return nil, fmt.Errorf("the Dockerfile has no FROM instruction")
	}
	content, err := f.RewriteFroms(map[int]string{len(f.Stages) - 1: image})
	if err != nil {
		return nil, err
	}
	return Parse(content)
}

// RewriteFroms returns f's text with the image of the FROM of each stage
// in images (by index) replaced by the image given for it, keeping the
// instruction's flags and stage name, and every other line as it is.
func (f *File) RewriteFroms(images map[int]string) ([]byte, error) {
	lines := strings.SplitAfter(string(f.content), "\n")
	// From the last FROM to the first, so that earlier line numbers hold.
	for _, stage := range slices.Backward(slices.Sorted(maps.Keys(images))) {
		if stage < 0 || stage >= len(f.Stages) {
			return nil, fmt.Errorf("the Dockerfile has no stage %d", stage)
		}
		from := f.Instructions[f.Stages[stage].From]
		instruction := "FROM"
		for _, fl := range from.Flags {
			instruction += " " + fl.Raw
		}
		instruction += " " + images[stage]
		if name := from.stageName(); name != "" {
			instruction += " AS " + name
		}
		start, end := from.StartLine-1, from.EndLine
		if start < 0 || end > len(lines) || start >= end {
			return nil, fmt.Errorf("the Dockerfile's FROM is at lines %d-%d of %d", from.StartLine, from.EndLine, len(lines))
		}
		lines = slices.Concat(lines[:start], []string{instruction + "\n"}, lines[end:])
	}
	return []byte(strings.Join(lines, "")), nil
}
