package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/openshift/imagebuilder"
)

// argReference finds the variables an instruction names: $NAME and
// ${NAME...}.
var argReference = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// cacheArgsLabelPrefix starts the label a build with a layer cache asks
// buildah to unset: the label is never there, but its name ends in the
// digest cacheArgsDigest returns, and buildah records the labels it unsets
// in every step's history, which its cache keys digest.
const cacheArgsLabelPrefix = "archway.dev/cache-args-"

// cacheArgsDigest returns a digest of the values of the build args in args
// that instructions other than RUN and FROM name, or "" when they name
// none. buildah's cache keys cover the instruction as written, and for a
// RUN the values of the args it sees, for a COPY or ADD the content copied,
// for a FROM the base image's layers: a changed arg named by an ENV, LABEL,
// WORKDIR, USER or a COPY destination would otherwise reuse the step built
// with the old value (checked on the bed: ENV VERSION=$VERSION kept the old
// VERSION). With the digest in every step's key, such a change rebuilds every
// step, and a build whose args reach the image through RUN steps alone
// keeps buildah's finer keys.
func cacheArgsDigest(dockerfile []byte, args map[string]string) (string, error) {
	root, err := imagebuilder.ParseDockerfile(bytes.NewReader(dockerfile))
	if err != nil {
		return "", fmt.Errorf("parsing the Dockerfile: %w", err)
	}
	named := map[string]string{}
	for _, node := range root.Children {
		switch strings.ToLower(node.Value) {
		case "run", "from":
			continue
		}
		for _, m := range argReference.FindAllStringSubmatch(node.Original, -1) {
			if v, ok := args[m[1]]; ok {
				named[m[1]] = v
			}
		}
	}
	if len(named) == 0 {
		return "", nil
	}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(named)) {
		fmt.Fprintf(h, "%s=%q\n", name, named[name])
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
