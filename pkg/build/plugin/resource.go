package plugin

import (
	"fmt"
	"strings"
)

// kind is what a command argument names: a Build or a BuildConfig.
type kind string

const (
	kindBuild       kind = "build"
	kindBuildConfig kind = "buildconfig"
)

// kindSpellings are the resource names kubectl and oc accept for each kind,
// short names and group-qualified forms included.
var kindSpellings = map[string]kind{
	"build": kindBuild, "builds": kindBuild,
	"build.build.openshift.io": kindBuild, "builds.build.openshift.io": kindBuild,
	"bc": kindBuildConfig, "buildconfig": kindBuildConfig, "buildconfigs": kindBuildConfig,
	"buildconfig.build.openshift.io": kindBuildConfig, "buildconfigs.build.openshift.io": kindBuildConfig,
}

// resourceArg reads KIND/NAME as kubectl does; a bare NAME is of kind
// bare. allowed lists the kinds the command takes.
func resourceArg(arg string, bare kind, allowed ...kind) (kind, string, error) {
	k, name, found := strings.Cut(arg, "/")
	if !found {
		k, name = string(bare), arg
	} else if kk, ok := kindSpellings[strings.ToLower(k)]; ok {
		k = string(kk)
	} else {
		return "", "", fmt.Errorf("%q: %q is not a kind this command takes: use %s", arg, k, usageOf(allowed))
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: use %s", arg, usageOf(allowed))
	}
	for _, a := range allowed {
		if kind(k) == a {
			return a, name, nil
		}
	}
	return "", "", fmt.Errorf("%q: use %s", arg, usageOf(allowed))
}

func usageOf(allowed []kind) string {
	var forms []string
	for _, a := range allowed {
		switch a {
		case kindBuild:
			forms = append(forms, "build/NAME")
		case kindBuildConfig:
			forms = append(forms, "bc/NAME")
		}
	}
	return strings.Join(forms, " or ")
}

// buildName accepts NAME, build/NAME and builds/NAME (and the group-qualified
// forms kubectl prints).
func buildName(arg string) (string, error) {
	_, name, err := resourceArg(arg, kindBuild, kindBuild)
	return name, err
}
