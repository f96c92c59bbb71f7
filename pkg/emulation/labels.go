package emulation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Label is the node label saying the node runs arch's binaries under
// emulation: emulation.archway.dev/<arch>.
func Label(arch string) string { return buildv1.EmulationLabelPrefix + arch }

// LabelChanges returns what to change in a node's labels so that they say
// exactly which foreign architectures it emulates: Label(arch)=true for
// each registered architecture but the node's own (kubernetes.io/arch),
// and no emulation label for any other. A nil value removes the label.
// Empty when the labels already say it.
func LabelChanges(labels map[string]string, registered map[string]bool) map[string]*string {
	own := labels[corev1.LabelArchStable]
	out := map[string]*string{}
	want := map[string]bool{}
	for arch := range registered {
		if registered[arch] && arch != own {
			want[Label(arch)] = true
		}
	}
	for key := range want {
		if labels[key] != "true" {
			out[key] = ptrTo("true")
		}
	}
	for key := range labels {
		if strings.HasPrefix(key, buildv1.EmulationLabelPrefix) && !want[key] {
			out[key] = nil
		}
	}
	return out
}

func ptrTo(s string) *string { return &s }

// Sync reads which qemu handlers are registered in the binfmt_misc
// directory dir and sets node's emulation labels to match (LabelChanges).
// It returns the registered architectures.
func Sync(ctx context.Context, c client.Client, node, dir string) (map[string]bool, error) {
	registered, err := Registered(dir)
	if err != nil {
		return nil, err
	}
	return registered, setLabels(ctx, c, node, registered)
}

// Clear removes every emulation label from node: no one keeps them true
// once the DaemonSet's pod stops.
func Clear(ctx context.Context, c client.Client, node string) error {
	return setLabels(ctx, c, node, nil)
}

func setLabels(ctx context.Context, c client.Client, name string, registered map[string]bool) error {
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	changes := LabelChanges(n.Labels, registered)
	if len(changes) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": changes}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("labelling node %s: %w", name, err)
	}
	return nil
}
