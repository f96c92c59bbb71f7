package v1alpha1

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

// DefaultBuilderServiceAccount is the service account of build pods when
// neither the Build nor the configuration names one, as in OpenShift:
// build-controller creates it in every namespace that runs builds.
const DefaultBuilderServiceAccount = "builder"

// DefaultTrustedCAKey is the key of the trusted CA bundle in the
// build.trustedCA ConfigMap when the configuration names none: the key
// OpenShift injects into ConfigMaps labelled
// config.openshift.io/inject-trusted-cabundle=true.
const DefaultTrustedCAKey = "ca-bundle.crt"

// DefaultImageChangePollInterval is build.imageChangeTrigger.pollInterval's
// default.
const DefaultImageChangePollInterval = 5 * time.Minute

// Defaults of the build pods' bounds.
const (
	DefaultActiveDeadlineSeconds int64 = 4 * 60 * 60
	DefaultWorkDirSizeLimit            = "10Gi"
	DefaultStorageSizeLimit            = "40Gi"
)

// Load reads the configuration file at path, fills in defaults and
// validates it. Errors name the file and the field.
func Load(path string) (*BuildControllerConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration file: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes a configuration file (YAML or JSON), fills in defaults and
// validates it. Unknown fields are errors, so a misspelt field is not
// silently ignored.
func Parse(data []byte) (*BuildControllerConfiguration, error) {
	cfg := &BuildControllerConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	SetDefaults(cfg)
	if errs := Validate(cfg); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

// SetDefaults fills in the defaults the field documentation gives.
func SetDefaults(cfg *BuildControllerConfiguration) {
	b := &cfg.Build
	if b.BuilderServiceAccount == "" {
		b.BuilderServiceAccount = DefaultBuilderServiceAccount
	}
	if b.PodSecurity == "" {
		b.PodSecurity = PodSecurityUnprivileged
	}
	if b.ActiveDeadlineSeconds == nil {
		b.ActiveDeadlineSeconds = ptr.To(DefaultActiveDeadlineSeconds)
	}
	if b.WorkDirSizeLimit == nil {
		b.WorkDirSizeLimit = ptr.To(resource.MustParse(DefaultWorkDirSizeLimit))
	}
	if b.StorageSizeLimit == nil {
		b.StorageSizeLimit = ptr.To(resource.MustParse(DefaultStorageSizeLimit))
	}
	if b.ImageChangeTrigger.PollInterval == nil {
		b.ImageChangeTrigger.PollInterval = &metav1.Duration{Duration: DefaultImageChangePollInterval}
	}
	if b.TrustedCA != nil && b.TrustedCA.Key == "" {
		b.TrustedCA.Key = DefaultTrustedCAKey
	}
	if b.BuildOverrides.ArchNodeSelector == nil {
		b.BuildOverrides.ArchNodeSelector = ptr.To(true)
	}
	if b.BuildOverrides.ManifestList == nil {
		b.BuildOverrides.ManifestList = ptr.To(true)
	}
}

// Validate checks a defaulted configuration and returns every problem, each
// naming its field.
func Validate(cfg *BuildControllerConfiguration) field.ErrorList {
	var errs field.ErrorList
	if cfg.APIVersion != GroupVersion.String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), cfg.APIVersion,
			fmt.Sprintf("must be %s", GroupVersion.String())))
	}
	if cfg.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), cfg.Kind, fmt.Sprintf("must be %s", Kind)))
	}
	errs = append(errs, validateBuild(&cfg.Build, field.NewPath("build"))...)
	errs = append(errs, validatePlacement(&cfg.Placement, field.NewPath("placement"))...)
	return errs
}

func validateBuild(b *BuildControllerConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if b.BuilderImage == "" {
		errs = append(errs, field.Required(path.Child("builderImage"), "the image of build pods (it runs cmd/builder)"))
	} else {
		errs = append(errs, validateImage(b.BuilderImage, path.Child("builderImage"))...)
	}
	seen := map[string]int{}
	for i, pi := range b.PlatformBuilderImages {
		p := path.Child("platformBuilderImages").Index(i)
		errs = append(errs, validatePlatform(pi.Platform, p.Child("platform"))...)
		if pl, err := platform.Parse(pi.Platform); err == nil {
			if j, dup := seen[pl.Key()]; dup {
				errs = append(errs, field.Duplicate(p.Child("platform"),
					fmt.Sprintf("%s (the same platform as platformBuilderImages[%d])", pi.Platform, j)))
			}
			seen[pl.Key()] = i
		}
		if pi.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), ""))
		} else {
			errs = append(errs, validateImage(pi.Image, p.Child("image"))...)
		}
	}
	switch b.PodSecurity {
	case PodSecurityUnprivileged, PodSecurityPrivileged:
	default:
		errs = append(errs, field.NotSupported(path.Child("podSecurity"), b.PodSecurity,
			[]string{string(PodSecurityUnprivileged), string(PodSecurityPrivileged)}))
	}
	switch b.LayerCache.Mode {
	case "", buildv1.LayerCacheRegistry, buildv1.LayerCacheDisabled:
	default:
		errs = append(errs, field.NotSupported(path.Child("layerCache", "mode"), b.LayerCache.Mode,
			[]string{string(buildv1.LayerCacheRegistry), string(buildv1.LayerCacheDisabled)}))
	}
	if d := b.ActiveDeadlineSeconds; d != nil && *d < 1 {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *d, "must be at least 1"))
	}
	for _, l := range []struct {
		name string
		q    *resource.Quantity
	}{{"workDirSizeLimit", b.WorkDirSizeLimit}, {"storageSizeLimit", b.StorageSizeLimit}} {
		if l.q != nil && l.q.Sign() <= 0 {
			errs = append(errs, field.Invalid(path.Child(l.name), l.q.String(), "must be positive"))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(b.BuilderServiceAccount) {
		errs = append(errs, field.Invalid(path.Child("builderServiceAccount"), b.BuilderServiceAccount, msg))
	}
	if b.BuilderServiceAccount == "default" {
		// The controller binds the builder's role to it: every pod of the
		// namespace that names no service account would hold it.
		errs = append(errs, field.Invalid(path.Child("builderServiceAccount"), b.BuilderServiceAccount,
			"build pods must not run as the namespace's default service account, which every other pod gets: use builder (the default) or another name"))
	}
	if u := b.UnfitNodes; u != nil {
		p := path.Child("unfitNodes")
		if u.LabelKey == "" {
			errs = append(errs, field.Required(p.Child("labelKey"), "the node label that marks nodes unfit for builds"))
		} else {
			for _, msg := range validation.IsQualifiedName(u.LabelKey) {
				errs = append(errs, field.Invalid(p.Child("labelKey"), u.LabelKey, msg))
			}
		}
		for i, v := range u.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(p.Child("values").Index(i), v, msg))
			}
		}
	}
	if d := b.ImageChangeTrigger.PollInterval; d != nil && d.Duration < time.Second {
		errs = append(errs, field.Invalid(path.Child("imageChangeTrigger", "pollInterval"), d.Duration.String(), "must be at least 1s"))
	}
	if ca := b.TrustedCA; ca != nil {
		p := path.Child("trustedCA")
		if ca.ConfigMapName == "" {
			errs = append(errs, field.Required(p.Child("configMapName"), "the ConfigMap holding the trusted CA bundle in each build's namespace"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(ca.ConfigMapName) {
				errs = append(errs, field.Invalid(p.Child("configMapName"), ca.ConfigMapName, msg))
			}
		}
		for _, msg := range validation.IsConfigMapKey(ca.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), ca.Key, msg))
		}
	}
	errs = append(errs, validateEmulation(&b.Emulation, path.Child("emulation"))...)
	errs = append(errs, validateDefaults(&b.BuildDefaults, path.Child("buildDefaults"))...)
	errs = append(errs, validateOverrides(&b.BuildOverrides, path.Child("buildOverrides"))...)
	return errs
}

func validateEmulation(e *EmulationConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, ep := range e.Platforms {
		p := path.Child("platforms").Index(i)
		errs = append(errs, validatePlatform(ep.Platform, p.Child("platform"))...)
		pl, perr := platform.Parse(ep.Platform)
		if perr == nil {
			if j, dup := seen[pl.Key()]; dup {
				errs = append(errs, field.Duplicate(p.Child("platform"),
					fmt.Sprintf("%s (the same platform as platforms[%d])", ep.Platform, j)))
			}
			seen[pl.Key()] = i
			if pl.OS != "linux" {
				errs = append(errs, field.Invalid(p.Child("platform"), ep.Platform,
					"only linux platforms can be emulated (qemu user-mode through binfmt_misc)"))
			}
		}
		if len(ep.HostArchitectures) == 0 {
			errs = append(errs, field.Required(p.Child("hostArchitectures"),
				"the architectures of the nodes that may emulate the platform, e.g. [amd64]"))
		}
		hosts := sets.New[string]()
		for j, a := range ep.HostArchitectures {
			hp := p.Child("hostArchitectures").Index(j)
			if _, err := platform.Parse("linux/" + a); err != nil || strings.Contains(a, "/") {
				errs = append(errs, field.NotSupported(hp, a, platform.KnownArchitectures()))
				continue
			}
			if hosts.Has(a) {
				errs = append(errs, field.Duplicate(hp, a))
			}
			hosts.Insert(a)
			if perr == nil && pl.Architecture == a {
				errs = append(errs, field.Invalid(hp, a,
					"the platform's own architecture builds it natively: list only other architectures"))
			}
		}
	}
	return errs
}

func validateDefaults(d *BuildDefaultsConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, env := range d.Env {
		p := path.Child("env").Index(i)
		if env.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		for _, msg := range validation.IsEnvVarName(env.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), env.Name, msg))
		}
		if names.Has(env.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), env.Name))
		}
		names.Insert(env.Name)
		if env.ValueFrom != nil {
			errs = append(errs, field.Forbidden(p.Child("valueFrom"),
				"build defaults take plain values: the builder cannot resolve valueFrom"))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(d.Labels, path.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(d.Annotations, path.Child("annotations"))...)
	errs = append(errs, metav1validation.ValidateLabels(d.NodeSelector, path.Child("nodeSelector"))...)
	errs = append(errs, validateResources(d.Resources, path.Child("resources"))...)
	errs = append(errs, validateImageLabels(d.ImageLabels, path.Child("imageLabels"))...)
	errs = append(errs, validatePlatforms(d.Platforms, path.Child("platforms"))...)
	return errs
}

func validateOverrides(o *BuildOverridesConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateImageLabels(o.ImageLabels, path.Child("imageLabels"))...)
	errs = append(errs, metav1validation.ValidateLabels(o.NodeSelector, path.Child("nodeSelector"))...)
	if _, ok := o.NodeSelector[corev1.LabelOSStable]; ok {
		errs = append(errs, field.Forbidden(path.Child("nodeSelector").Key(corev1.LabelOSStable),
			"an override never changes a build pod's operating system (as in OpenShift); set it in buildDefaults.nodeSelector"))
	}
	for i, t := range o.Tolerations {
		errs = append(errs, validateToleration(t, path.Child("tolerations").Index(i))...)
	}
	errs = append(errs, apivalidation.ValidateAnnotations(o.Annotations, path.Child("annotations"))...)
	errs = append(errs, metav1validation.ValidateLabels(o.Labels, path.Child("labels"))...)
	for _, reserved := range []string{buildv1.BuildLabel, buildv1.PlatformLabel, buildv1.PodRoleLabel} {
		if _, ok := o.Labels[reserved]; ok {
			errs = append(errs, field.Forbidden(path.Child("labels").Key(reserved),
				"archway sets this label on build pods itself"))
		}
	}
	errs = append(errs, validatePlatforms(o.Platforms, path.Child("platforms"))...)
	return errs
}

func validatePlatform(s string, path *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(path, `"os/arch" or "os/arch/variant", e.g. linux/arm64`)}
	}
	if _, err := platform.Parse(s); err != nil {
		return field.ErrorList{field.Invalid(path, s, err.Error())}
	}
	return nil
}

func validatePlatforms(ss []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ss) > buildv1.MaxPlatforms {
		errs = append(errs, field.TooMany(path, len(ss), buildv1.MaxPlatforms))
	}
	first := map[string]int{}
	for i, s := range ss {
		errs = append(errs, validatePlatform(s, path.Index(i))...)
		p, err := platform.Parse(s)
		if err != nil {
			continue
		}
		if j, dup := first[p.Key()]; dup {
			errs = append(errs, field.Duplicate(path.Index(i),
				fmt.Sprintf("%s (the same platform as [%d], %s)", s, j, ss[j])))
			continue
		}
		first[p.Key()] = i
	}
	return errs
}

func validateImage(ref string, path *field.Path) field.ErrorList {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return field.ErrorList{field.Invalid(path, ref, "not an image reference: "+err.Error())}
	}
	return nil
}

func validateImageLabels(labels []buildv1.ImageLabel, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, l := range labels {
		p := path.Index(i).Child("name")
		switch {
		case strings.TrimSpace(l.Name) == "":
			errs = append(errs, field.Required(p, ""))
		case seen.Has(l.Name):
			errs = append(errs, field.Duplicate(p, l.Name))
		}
		seen.Insert(l.Name)
	}
	return errs
}

func validateResources(r corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(), "must not be negative"))
		}
		if limit, ok := r.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(),
				fmt.Sprintf("must not be more than the limit %s", limit.String())))
		}
	}
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

func validateToleration(t corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "an empty key needs operator Exists"))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty with operator Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator,
			[]string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(path.Child("key"), t.Key, msg))
		}
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, []string{
			string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("tolerationSeconds"), *t.TolerationSeconds, "only with effect NoExecute"))
	}
	return errs
}
