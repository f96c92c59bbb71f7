package plugin

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Shell completion (kubectl archway completion bash|zsh|fish|powershell,
// or kubectl's own completion of plugins through kubectl_complete-archway)
// offers the names of the namespace's Builds and BuildConfigs, read with
// the connection flags given so far. A failure to read offers nothing: a
// completion never prints an error into the user's command line.

// completeNames completes an argument naming a resource: bare names are of
// kind bare, KIND/ names of that kind; with more than one kind allowed,
// the KIND/ prefixes are offered too. Only the first maxArgs arguments are
// completed (0: any number).
func (o *env) completeNames(maxArgs int, bare kind, allowed ...kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if maxArgs > 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		prefix, k := "", bare
		if typed, _, found := strings.Cut(toComplete, "/"); found {
			kk, ok := kindSpellings[strings.ToLower(typed)]
			if !ok || !slices.Contains(allowed, kk) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			prefix, k = typed+"/", kk
		}
		var out []cobra.Completion
		for _, name := range o.names(cmd.Context(), k) {
			if c := prefix + name; strings.HasPrefix(c, toComplete) {
				out = append(out, c)
			}
		}
		if prefix == "" && len(allowed) > 1 {
			for _, a := range allowed {
				if p := shortKind(a) + "/"; strings.HasPrefix(p, toComplete) {
					out = append(out, p)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func shortKind(k kind) string {
	if k == kindBuildConfig {
		return "bc"
	}
	return string(k)
}

// names lists the names of the namespace's objects of kind k, sorted.
func (o *env) names(ctx context.Context, k kind) []string {
	c, _, ns, err := o.clients()
	if err != nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var names []string
	switch k {
	case kindBuild:
		var list buildv1.BuildList
		if c.List(ctx, &list, client.InNamespace(ns)) == nil {
			for _, b := range list.Items {
				names = append(names, b.Name)
			}
		}
	case kindBuildConfig:
		var list buildv1.BuildConfigList
		if c.List(ctx, &list, client.InNamespace(ns)) == nil {
			for _, bc := range list.Items {
				names = append(names, bc.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// registerNamespaceCompletion completes -n with the cluster's namespaces,
// as kubectl does.
func (o *env) registerNamespaceCompletion(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, _, _, err := o.clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list corev1.NamespaceList
		if c.List(cmd.Context(), &list) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, toComplete) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// completePlatforms offers the platforms builds are commonly made for.
func completePlatforms(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	// A comma-separated list completes its last element.
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	var out []cobra.Completion
	for _, p := range []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x", "linux/arm/v7", "linux/riscv64", "linux/386"} {
		if strings.HasPrefix(p, last) {
			out = append(out, done+p)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
