package podcontroller

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// policy is what the configs ask of one pod: preferred architecture
// weights and the fallback architecture.
type policy struct {
	// Weights are the winning weight of each architecture, in order.
	Weights []preference
	// shadowed are the configured weights not applied and why: recorded on
	// the pod as skipped.
	shadowed []sourceEntry
	fallback string
}

// preference is one configured architecture weight and the config it
// comes from.
type preference struct {
	Architecture string
	Weight       int32
	// Source names the config as the preferred-affinity-sources annotation
	// does: ClusterPodPlacementConfig or PodPlacementConfig-<name>.
	Source string
}

// Sources of preferences, as the multiarch tuning operator names them.
const (
	sourceCluster   = "ClusterPodPlacementConfig"
	sourcePodPrefix = "PodPlacementConfig-"
)

// PolicyFor combines the configs that apply to pod: the
// PodPlacementConfigs of its namespace whose labelSelector matches the pod
// and whose nodeAffinityScoring is enabled, by descending priority (equal
// priorities, which validation forbids, by name), then the cluster config.
// Under HighestPriority (the default) the first of them alone decides
// every preference; under PerArchitecture each architecture takes its
// weight from the first config naming it. The fallback is the cluster
// config's.
func PolicyFor(pod *corev1.Pod, cluster *multiarchv1beta1.ClusterPodPlacementConfigSpec, local []multiarchv1beta1.PodPlacementConfig) policy {
	matching := make([]*multiarchv1beta1.PodPlacementConfig, 0, len(local))
	for i := range local {
		if local[i].DeletionTimestamp == nil && len(scoringTerms(local[i].Spec.Plugins)) > 0 && selects(local[i].Spec.LabelSelector, pod.Labels) {
			matching = append(matching, &local[i])
		}
	}
	slices.SortFunc(matching, func(a, b *multiarchv1beta1.PodPlacementConfig) int {
		if c := cmp.Compare(b.Spec.Priority, a.Spec.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	var p policy
	perArch := cluster != nil && cluster.PreferenceMerge == multiarchv1beta1.PreferenceMergePerArchitecture
	seen := sets.New[string]()
	winner := ""
	add := func(plugins *multiarchv1beta1.Plugins, source string) {
		for _, w := range scoringTerms(plugins) {
			pref := preference{Architecture: w.Architecture, Weight: w.Weight, Source: source}
			switch {
			case !perArch && winner != "" && winner != source:
				p.shadowed = append(p.shadowed, sourceEntry{preference: pref, skipped: "the higher-priority " + winner + " applies to the pod"})
			case seen.Has(w.Architecture):
				p.shadowed = append(p.shadowed, sourceEntry{preference: pref, skipped: "a higher-priority config sets " + w.Architecture})
			default:
				seen.Insert(w.Architecture)
				p.Weights = append(p.Weights, pref)
				winner = cmp.Or(winner, source)
			}
		}
	}
	for _, c := range matching {
		add(c.Spec.Plugins, sourcePodPrefix+c.Name)
	}
	if cluster != nil {
		add(cluster.Plugins, sourceCluster)
		p.fallback = cluster.FallbackArchitecture
	}
	return p
}

// scoringTerms are the weights of an enabled nodeAffinityScoring plugin.
func scoringTerms(plugins *multiarchv1beta1.Plugins) []multiarchv1beta1.NodeAffinityScoringPlatformTerm {
	if plugins == nil || plugins.NodeAffinityScoring == nil || !plugins.NodeAffinityScoring.Enabled {
		return nil
	}
	return plugins.NodeAffinityScoring.Platforms
}

// selects applies a PodPlacementConfig's selector: unset selects every pod,
// a selector that does not parse selects none.
func selects(selector *metav1.LabelSelector, podLabels map[string]string) bool {
	if selector == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(selector)
	return err == nil && s.Matches(labels.Set(podLabels))
}

// WouldAddPreferences reports whether placing the pod would add a
// preferred term: some config applying to it weighs an architecture, and
// the pod states no architecture preference of its own.
func WouldAddPreferences(pod *corev1.Pod, pol policy) bool {
	return len(pol.Weights) > 0 && !hasArchPreference(pod)
}
