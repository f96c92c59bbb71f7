package plugin

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/archway-build/archway/pkg/platform"
)

// addPlatformFlag adds --platform, the one spelling of the platforms flag
// in every command, as docker buildx spells it: comma-separated, and
// repeatable. --platforms, the BuildConfig field's name, is read as
// --platform.
func addPlatformFlag(cmd *cobra.Command, p *[]string, usage string) {
	cmd.Flags().StringSliceVar(p, "platform", nil, usage+" (comma-separated or repeated; --platforms is the same flag)")
	cmd.Flags().SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "platforms" {
			name = "platform"
		}
		return pflag.NormalizedName(name)
	})
	_ = cmd.RegisterFlagCompletionFunc("platform", completePlatforms)
}

// checkPlatforms refuses a platform that is not one, naming the flag.
func checkPlatforms(flag string, platforms []string) error {
	for _, p := range platforms {
		if _, err := platform.Parse(p); err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
	}
	return nil
}

// envVars reads NAME=VALUE pairs of a flag (--env, --build-arg).
func envVars(flag string, pairs []string) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.TrimSpace(k) != k {
			return nil, fmt.Errorf("--%s %q: use NAME=VALUE", flag, kv)
		}
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out, nil
}
