package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/archway-build/archway/pkg/build/cacheprune"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

func newPruneCacheCommand() *cobra.Command {
	var (
		cacheRepo, authFile, output string
		platforms, insecure         []string
		keep                        time.Duration
		confirm                     bool
	)
	cmd := &cobra.Command{
		Use:   "prune-cache --cache-repo REPO --platform PLATFORMS [--keep-younger-than 168h] [--confirm]",
		Short: "Remove old steps and results from the layer cache repositories of `build --cache-repo`",
		Long: `prune-cache removes the tags of a layer cache whose images were created more than
--keep-younger-than ago, in the cache repository of each platform (REPO-linux-arm64, ...), as
` + "`oc adm prune images`" + ` does: without --confirm it only lists what it would remove.

Only the tags builds write there are considered: a step's cache key (64 lowercase hexadecimal
digits) and a whole result (result- and 64 hexadecimal digits); any other tag is kept, as is an
image index, an artifact or an image that cannot be read under a cache tag. Tags are deleted, never
manifests by digest: the registry's garbage collection frees the blobs afterwards. A later build
simply builds and pushes a pruned step again. The age is the image's creation time, not its last use
(a step every build reuses goes once it is older, and is pushed again), or the time a
SOURCE_DATE_EPOCH build arg gives. A cache repository is shared by every build that names it.

Credentials are the ones containers/image finds (--authfile, $REGISTRY_AUTH_FILE,
$XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json); deleting needs a credential allowed to
delete, and a registry that allows deleting (Distribution: storage.delete.enabled).`,
		Example: `  builder prune-cache --cache-repo registry.example.com/team/app-cache \
    --platform linux/amd64,linux/arm64 --keep-younger-than 336h --confirm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cacheRepo == "" {
				return fmt.Errorf("--cache-repo is required: the repository given to build --cache-repo")
			}
			if len(platforms) == 0 {
				return fmt.Errorf("--platform is required: the platforms whose caches to prune, e.g. linux/amd64,linux/arm64")
			}
			if keep < 0 {
				return fmt.Errorf("--keep-younger-than %s is negative: give a duration of 0 or more, e.g. 168h", keep)
			}
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: use json, or leave it out for a table", output)
			}
			repos, err := cacheRepositories(cacheRepo, platforms)
			if err != nil {
				return err
			}
			auth, err := registry.UserAuthFile(authFile)
			if err != nil {
				return fmt.Errorf("--authfile: %w", err)
			}
			results, err := cacheprune.Prune(cmd.Context(), repos, cacheprune.Options{
				Access:          registry.Access{AuthFile: auth, InsecureRegistries: insecure, UserAgent: "archway-builder"},
				KeepYoungerThan: keep, Confirm: confirm,
			})
			if err != nil {
				return err
			}
			if output == "json" {
				err = cacheprune.WriteJSON(cmd.OutOrStdout(), results)
			} else {
				err = cacheprune.WriteTable(cmd.OutOrStdout(), results, keep, confirm)
			}
			if err != nil {
				return err
			}
			return cacheprune.Summarize(results).Err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cacheRepo, "cache-repo", "", "the layer cache repository given to build --cache-repo (each platform's cache is REPO-os-arch[-variant])")
	f.StringSliceVar(&platforms, "platform", nil, "platforms whose caches to prune, os/arch[/variant], comma-separated or repeated")
	f.DurationVar(&keep, "keep-younger-than", 7*24*time.Hour, "keep cache images created less than this long ago (0s: remove every cache tag)")
	f.BoolVar(&confirm, "confirm", false, "remove the tags; without it, only list what would be removed")
	f.StringVarP(&output, "output", "o", "", "json: print the result as JSON instead of a table")
	f.StringVar(&authFile, "authfile", "", "docker config file (or directory holding one) with registry credentials")
	f.StringSliceVar(&insecure, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are)")
	return cmd
}

// cacheRepositories returns the cache repository of each platform, one per
// platform however it is spelt.
func cacheRepositories(repo string, platforms []string) ([]string, error) {
	var out []string
	for _, p := range platforms {
		if _, err := platform.Parse(p); err != nil {
			return nil, fmt.Errorf("--platform: %w", err)
		}
		r, err := platform.CacheRepository(repo, p)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}
