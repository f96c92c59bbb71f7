package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/platform"
)

// EmulationLabel is the node label that says a node runs binaries of arch
// under emulation (qemu's binfmt_misc handler registered):
// emulation.archway.dev/<arch>=true.
func EmulationLabel(arch string) string { return buildv1.EmulationLabelPrefix + arch }

// emulationPolicy is what one Build may have emulated: the configured
// platforms it may use, by platform key, and why each other configured
// platform is not among them.
type emulationPolicy struct {
	allowed map[string]configv1alpha1.EmulatedPlatform
	// refused says, by platform key, why a platform the configuration
	// lists (or the annotation names) is not emulated for this Build.
	refused map[string]string
}

// emulationFor decides which configured platforms a Build may have built
// under emulation, from build.emulation and the Build's
// build.openshift.io/emulation annotation (request, "" when absent).
// The annotation only narrows: "Never" refuses every platform; a list
// keeps only the platforms it names, and is the only way to get a
// platform configured onRequest. A platform the list names that the
// configuration does not emulate stays refused. An annotation that does
// not parse is an error naming what to write.
func emulationFor(cfg []configv1alpha1.EmulatedPlatform, request string) (emulationPolicy, error) {
	pol := emulationPolicy{allowed: map[string]configv1alpha1.EmulatedPlatform{}, refused: map[string]string{}}
	var named map[string]bool
	request = strings.TrimSpace(request)
	switch request {
	case "":
	case buildv1.EmulationNever:
		named = map[string]bool{}
	default:
		named = map[string]bool{}
		for _, s := range strings.Split(request, ",") {
			p, err := platform.Parse(strings.TrimSpace(s))
			if err != nil {
				return pol, fmt.Errorf("annotation %s: %w; write %s or a comma-separated list of platforms such as linux/arm/v7,linux/riscv64",
					buildv1.EmulationAnnotation, err, buildv1.EmulationNever)
			}
			named[p.Key()] = true
		}
	}
	for _, ep := range cfg {
		p, err := platform.Parse(ep.Platform)
		if err != nil {
			// The configuration is validated at load: not reached.
			continue
		}
		key := p.Key()
		switch {
		case named == nil && ep.OnRequest:
			pol.refused[key] = fmt.Sprintf("build.emulation emulates it only for Builds that name it in the %s annotation", buildv1.EmulationAnnotation)
		case named != nil && !named[key]:
			pol.refused[key] = fmt.Sprintf("build.emulation allows emulating it, but the Build's %s annotation (%q) does not name it",
				buildv1.EmulationAnnotation, request)
		default:
			pol.allowed[key] = ep
		}
	}
	for key := range named {
		if _, configured := pol.allowed[key]; !configured {
			if _, listed := pol.refused[key]; !listed {
				pol.refused[key] = fmt.Sprintf("the Build's %s annotation asks for emulation, which build-controller's build.emulation does not allow for this platform",
					buildv1.EmulationAnnotation)
			}
		}
	}
	return pol, nil
}

// emulationHost returns the first of ep's host architectures that has a
// Ready schedulable linux node, labelled as emulating p's architecture,
// that the build's pods could run on; "" when none has.
func emulationHost(nodes []corev1.Node, p platform.Platform, ep configv1alpha1.EmulatedPlatform, sel map[string]string, tols []corev1.Toleration) string {
	for _, host := range ep.HostArchitectures {
		want := withoutPlatformKeys(sel)
		want[corev1.LabelOSStable] = p.OS
		want[corev1.LabelArchStable] = host
		want[EmulationLabel(p.Architecture)] = "true"
		for i := range nodes {
			if nodeUsable(&nodes[i], want, tols) {
				return host
			}
		}
	}
	return ""
}

// noHostMessage says why an allowed emulated platform found no node.
func noHostMessage(p platform.Platform, ep configv1alpha1.EmulatedPlatform) string {
	return fmt.Sprintf("nor under emulation on %s (nodes labelled %s=true by the binfmt DaemonSet)",
		strings.Join(ep.HostArchitectures, " or "), EmulationLabel(p.Architecture))
}

// EmulatedNodeSelector is the node selector of a pod that builds p under
// emulation on nodes of architecture host: host's os/arch and the label
// saying the node emulates p's architecture.
func EmulatedNodeSelector(p platform.Platform, host string) map[string]string {
	return map[string]string{
		corev1.LabelOSStable:           p.OS,
		corev1.LabelArchStable:         host,
		EmulationLabel(p.Architecture): "true",
	}
}
