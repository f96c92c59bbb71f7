package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/cacheprune"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// defaultKeepYoungerThan is how old a cache image must be to be pruned
// unless told otherwise: a week.
const defaultKeepYoungerThan = 7 * 24 * time.Hour

type pruneCacheOptions struct {
	platforms      []string
	keep           time.Duration
	confirm        bool
	print          *printFlags
	repository     string
	registryConfig string
	insecure       []string
}

func newPrune(o *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove old data of archway builds (prune cache)",
	}
	cmd.AddCommand(newPruneCache(o))
	return cmd
}

func newPruneCache(o *env) *cobra.Command {
	po := &pruneCacheOptions{print: newPrintFlags("", o.scheme)}
	cmd := &cobra.Command{
		Use:   "cache BUILDCONFIG",
		Short: "Remove old layer cache tags of a BuildConfig's platforms from the registry",
		Long: `Remove the layer cache entries of a BuildConfig that are older than --keep-younger-than, as
oc adm prune images does: without --confirm it only lists what it would remove.

A BuildConfig with spec.strategy.dockerStrategy.layerCache.mode Registry keeps each platform's steps in
the repository <repository>-<os>-<arch>[-<variant>] (layerCache.repository, or the output's repository
followed by -cache). The platforms are the BuildConfig's spec.platforms and every platform named in the
status of its Builds still in the cluster; --platform replaces them. A BuildConfig that sets no
layerCache.mode uses the build controller's default layer cache, which keeps its steps in the same
repositories: they are pruned too (there are none when the controller's default is Disabled).
--repository names another cache repository, e.g. one layerCache.repository named before.

Only tags builds write are considered: a step's cache key (64 lowercase hexadecimal digits) and a whole
result (result- and 64 hexadecimal digits), removed when the image was created more than
--keep-younger-than ago. Every other tag is kept, as is an image index, an artifact or an image that
cannot be read under a cache tag. Tags are deleted, never manifests by digest: the registry's garbage
collection frees the blobs afterwards, and a build that needs a pruned step builds and pushes it again.
The age is the image's creation time, not its last use (a step every build reuses goes once it is
older, and is pushed again), or the time a SOURCE_DATE_EPOCH build arg gives. A cache repository is
shared by every BuildConfig that names it: pruning for one prunes it for all.

The registry is reached with your credentials, as podman and skopeo find them: --registry-config, else
$REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json. Removing needs a
credential allowed to delete tags, on a registry that allows deleting.`,
		Example: `  kubectl archway prune cache hello                       # dry run: what would go, older than a week
  kubectl archway prune cache hello --keep-younger-than 336h --confirm
  oc archway prune cache hello --platform linux/arm64 --registry-config ~/.docker/config.json --confirm -o json
  kubectl archway prune cache hello -o jsonpath='{range .items[*]}{.repository}{"\n"}{end}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return po.run(cmd.Context(), o, args[0])
		},
	}
	f := cmd.Flags()
	addPlatformFlag(cmd, &po.platforms, "platforms whose caches to prune, replacing the BuildConfig's and its Builds' (e.g. linux/amd64,linux/arm64)")
	f.DurationVar(&po.keep, "keep-younger-than", defaultKeepYoungerThan, "keep cache images created less than this long ago (0s: remove every cache tag)")
	f.BoolVar(&po.confirm, "confirm", false, "remove the tags; without it, only list what would be removed")
	f.StringVar(&po.repository, "repository", "", "the cache repository, without platform suffix, instead of the BuildConfig's (e.g. registry.example.com/team/app-cache)")
	f.StringVar(&po.registryConfig, "registry-config", "", "docker config file (or directory holding one) with registry credentials (default: as podman finds them)")
	f.StringSliceVar(&po.insecure, "insecure-registry", nil, "registries reached over plain HTTP or without TLS verification (loopback ones always are)")
	po.print.addFlags(cmd)
	if f := cmd.Flags().Lookup("output"); f != nil {
		formats := slices.DeleteFunc(po.print.formats(), func(f string) bool { return f == "name" })
		f.Usage = "Output format: " + strings.Join(formats, ", ") + ": a List whose items are the cache repositories and their tags (default: a table)."
	}
	return cmd
}

// printer is the printer -o asks for, nil for the table.
func (po *pruneCacheOptions) printer() (printers.ResourcePrinter, error) {
	switch *po.print.generic.OutputFormat {
	case "":
		return nil, nil
	case "name":
		return nil, errors.New(`--output "name": the cache repositories pruned are not API objects and have no names; use json, yaml, jsonpath, go-template or custom-columns`)
	}
	return po.print.printer()
}

// resultList is the prune's results as the List kubectl's printers print:
// one item per cache repository, with its tags.
func resultList(results []cacheprune.Repository) (*unstructured.UnstructuredList, error) {
	data, err := json.Marshal(results)
	if err != nil {
		return nil, err
	}
	var items []map[string]any
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for _, item := range items {
		list.Items = append(list.Items, unstructured.Unstructured{Object: item})
	}
	return list, nil
}

// validate refuses bad flags before anything is read.
func (po *pruneCacheOptions) validate() error {
	if po.keep < 0 {
		return fmt.Errorf("--keep-younger-than %s is negative: give a duration of 0 or more, e.g. 168h", po.keep)
	}
	if _, err := po.printer(); err != nil {
		return err
	}
	for _, p := range po.platforms {
		if _, err := platform.Parse(p); err != nil {
			return fmt.Errorf("--platform: %w", err)
		}
	}
	if po.repository != "" {
		if _, err := platform.CacheRepository(po.repository, "linux/amd64"); err != nil {
			return fmt.Errorf("--repository: %w", err)
		}
	}
	return nil
}

func (po *pruneCacheOptions) run(ctx context.Context, o *env, name string) error {
	if err := po.validate(); err != nil {
		return err
	}
	printer, err := po.printer()
	if err != nil {
		return err
	}
	auth, err := registry.UserAuthFile(po.registryConfig)
	if err != nil {
		return fmt.Errorf("--registry-config: %w", err)
	}
	c, _, ns, err := o.clients()
	if err != nil {
		return err
	}
	bc, err := getBuildConfig(ctx, c, ns, name)
	if err != nil {
		return err
	}
	repo, defaulted, err := cacheRepositoryOf(bc, po.repository)
	if err != nil {
		return err
	}
	if defaulted {
		fmt.Fprintf(o.streams.ErrOut, "buildconfig %q sets no layerCache.mode, so its builds use the build controller's default layer cache: "+
			"pruning where that keeps it, %s-<platform> (none is there if the controller's default is Disabled)\n", name, repo)
	}
	platforms := po.platforms
	if len(platforms) == 0 {
		var builds buildv1.BuildList
		if err := c.List(ctx, &builds, client.InNamespace(ns), client.MatchingLabels{buildv1.BuildConfigLabel: name}); err != nil {
			return fmt.Errorf("listing the BuildConfig's builds: %w", err)
		}
		platforms = platformsOf(bc, builds.Items)
		if len(platforms) == 0 {
			return fmt.Errorf("buildconfig %q names no platforms and none of its builds ran any: give them with --platform", name)
		}
	}
	var repos []string
	for _, p := range platforms {
		r, err := platform.CacheRepository(repo, p)
		if err != nil {
			return err
		}
		if !slices.Contains(repos, r) {
			repos = append(repos, r)
		}
	}
	results, err := cacheprune.Prune(ctx, repos, cacheprune.Options{
		Access:          registry.Access{AuthFile: auth, InsecureRegistries: po.insecure, UserAgent: "archway-cli"},
		KeepYoungerThan: po.keep, Confirm: po.confirm,
	})
	if err != nil {
		return err
	}
	if printer != nil {
		list, err := resultList(results)
		if err == nil {
			err = printer.PrintObj(list, o.streams.Out)
		}
		if err != nil {
			return err
		}
	} else if err := cacheprune.WriteTable(o.streams.Out, results, po.keep, po.confirm); err != nil {
		return err
	}
	return cacheprune.Summarize(results).Err()
}

// cacheRepositoryOf returns the layer cache repository (without platform
// suffix) of bc: override when given, else its Docker strategy's
// layerCache.repository, else its output's repository followed by -cache.
// defaulted says the BuildConfig sets no layerCache.mode, so that its
// builds use the build controller's default layer cache: the repository is
// where that default keeps it (the controller's configuration, which the
// plugin cannot read, may also leave the cache off; then the repositories
// do not exist and nothing is pruned). A BuildConfig that is neither a
// Docker nor a Source build, or whose layer cache is Disabled, is an error unless override
// names the repository.
func cacheRepositoryOf(bc *buildv1.BuildConfig, override string) (repo string, defaulted bool, err error) {
	if override != "" {
		return override, false, nil
	}
	if bc.Spec.Strategy.DockerStrategy == nil && bc.Spec.Strategy.SourceStrategy == nil {
		return "", false, fmt.Errorf("buildconfig %q is not a Docker build nor a Source build (neither dockerStrategy nor sourceStrategy is set), so it has no layer cache: "+
			"name a cache repository with --repository", bc.Name)
	}
	var own buildv1.LayerCache
	if lc := bc.Spec.Strategy.StrategyLayerCache(); lc != nil {
		own = *lc
	}
	switch own.Mode {
	case buildv1.LayerCacheRegistry:
	case "":
		defaulted = true
	default:
		return "", false, fmt.Errorf("buildconfig %q has its layer cache off (spec.strategy.dockerStrategy.layerCache.mode is %s): "+
			"name a cache repository with --repository", bc.Name, own.Mode)
	}
	if own.Repository != "" {
		return own.Repository, defaulted, nil
	}
	to := bc.Spec.Output.To
	if to == nil || to.Name == "" {
		return "", false, errors.New("buildconfig " + bc.Name + " has a layer cache without a repository and no output to derive one from: name it with --repository")
	}
	if repo, err = platform.OutputCacheRepository(to.Name); err != nil {
		return "", false, fmt.Errorf("the layer cache repository from spec.output.to: %w", err)
	}
	return repo, defaulted, nil
}

// platformsOf returns bc's platforms and those its builds' statuses name,
// once each, in that order.
func platformsOf(bc *buildv1.BuildConfig, builds []buildv1.Build) []string {
	var out, keys []string
	add := func(s string) {
		p, err := platform.Parse(s)
		if err != nil || slices.Contains(keys, p.Key()) {
			return
		}
		keys = append(keys, p.Key())
		out = append(out, strings.TrimSpace(s))
	}
	for _, p := range bc.Spec.Platforms {
		add(p)
	}
	slices.SortFunc(builds, func(a, b buildv1.Build) int { return strings.Compare(a.Name, b.Name) })
	for _, b := range builds {
		for _, p := range b.Status.Platforms {
			add(p.Platform)
		}
	}
	return out
}
