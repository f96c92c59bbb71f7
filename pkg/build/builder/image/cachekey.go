package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/archway-build/archway/pkg/build/dockerfile"
)

// cacheArgsLabelPrefix starts the label a build with a layer cache asks
// buildah to unset: the label is never there, but its name ends in the
// digest cacheArgsDigest returns, and buildah records the labels it unsets
// in every step's history, which its cache keys digest.
const cacheArgsLabelPrefix = "archway.dev/cache-args-"

// cacheArgsDigest returns a digest of the values of the build args in args
// that df's instructions other than RUN and FROM name (Instruction.Vars),
// or "" when they name none. buildah's cache keys cover the instruction as
// written, and for a RUN the values of the args it sees, for a COPY or ADD
// the content copied, for a FROM the base image's layers: a changed arg
// named by an ENV, LABEL, WORKDIR, USER or a COPY destination would
// otherwise reuse the step built with the old value (checked on the bed:
// ENV VERSION=$VERSION kept the old VERSION). With the digest in every
// step's key, such a change rebuilds every step, and a build whose args
// reach the image through RUN steps alone keeps buildah's finer keys.
func cacheArgsDigest(df *dockerfile.File, args map[string]string) string {
	named := map[string]string{}
	for _, in := range df.Instructions {
		switch in.Command {
		case "run", "from":
			continue
		}
		for _, name := range in.Vars {
			if v, ok := args[name]; ok {
				named[name] = v
			}
		}
	}
	if len(named) == 0 {
		return ""
	}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(named)) {
		fmt.Fprintf(h, "%s=%q\n", name, named[name])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
