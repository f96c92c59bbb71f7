package openshift_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	e2e "github.com/archway-build/archway/test/e2e/framework"
)

// buildsResource is OpenShift's Build resource (served on the bed by the
// stand-in CRD of testdata/crds).
var buildsResource = e2e.OpenShiftBuilds

// standIn plays OpenShift's build controller for Custom-strategy Builds,
// as openshift-controller-manager's BuildController does (the version of
// January 2022, pseudo-version v0.0.0-alpha.0.0.20220106174623-2c2d50dbda3a):
// it is written from these functions of
// github.com/openshift/openshift-controller-manager/pkg/build/controller:
//
//   - build.(*BuildController).handleNewBuild and createBuildPod: the pod
//     is created for a New Build, the Build gets the annotation
//     openshift.io/build.pod-name and moves to Pending;
//   - strategy.(*CustomBuildStrategy).CreateBuildPod with util.go's
//     addSourceEnvVars, addOutputEnvVars, setupDockerSecrets,
//     setupSourceSecrets, setupActiveDeadline, getPodLabels and
//     setOwnerReference: the pod itself (below, customPod);
//   - build.podCreationStrategy: the pod's openshift.io/build.name
//     annotation;
//   - build.(*BuildController).handleActiveBuild: the Build's phase follows
//     the pod's (Running, then Complete when it succeeded or Failed);
//   - build.(*BuildController).cancelBuild: status.cancelled deletes the
//     pod and moves the Build to Cancelled;
//   - build.(*BuildController).createBuildSystemConfConfigMap and
//     strategy.setupContainersConfigs: the Build's <build>-sys-config
//     ConfigMap (the cluster's registries.conf and policy.json, made from
//     its image config and ImageContentSourcePolicies: here, what a test
//     set with setClusterRegistries), owned by the pod, made after it and
//     mounted into it with the BUILD_*_PATH variables;
//   - build.(*BuildController).createBuildCAConfigMap and
//     createBuildCAConfigMapSpec, strategy.setupBuildCAs: the Build's
//     <build>-ca ConfigMap of the cluster's additional trusted registry CAs
//     (the image config's additionalTrustedCA ConfigMap, keys host or
//     host..port: here, what a test set with setClusterCAs), owned by the
//     pod, made after it, and mounted into it as build-ca-bundles at
//     /var/run/configs/openshift.io/certs with one item per key at
//     certs.d/<host[:port]>/ca.crt.
//
// What it leaves out: image stream resolution (the Builds here push to a
// DockerImage), the service account's push secret lookup, build defaults
// and overrides, the internal registry's service CA (OpenShift adds it to
// <build>-ca as service-ca.crt, mounted for the internal registry's host;
// the bed has no internal registry), the proxy's global CA ConfigMap, run
// policies.
type standIn struct {
	dyn  dynamic.Interface
	kube kubernetes.Interface
	// registries holds the cluster's registry files by the namespace of
	// the Builds that get them (registries.conf, policy.json).
	registries sync.Map
	// cas holds the cluster's additional trusted registry CAs (key host
	// or host..port, value PEM) by the namespace of the Builds that get
	// them.
	cas sync.Map
}

// The Build system ConfigMap's mount and keys, as OpenShift names them.
const (
	buildSystemConfigsVolume = "build-system-configs"
	buildSystemConfigsDir    = "/var/run/configs/openshift.io/build-system"
	registriesConfKey        = "registries.conf"
	signaturePolicyKey       = "policy.json"
)

// setClusterRegistries makes files the cluster's registry configuration
// for the Builds of namespace ns, as OpenShift's controller renders the
// image config and mirror policies.
func (s *standIn) setClusterRegistries(ns string, files map[string]string) {
	s.registries.Store(ns, files)
}

// The Build CA ConfigMap's volume and mount, as OpenShift names them.
const (
	buildCAVolume = "build-ca-bundles"
	buildCADir    = "/var/run/configs/openshift.io/certs"
)

// setClusterCAs makes cas (key host or host..port, value a PEM CA) the
// cluster's additional trusted registry CAs for the Builds of namespace
// ns, as an image config's additionalTrustedCA names them.
func (s *standIn) setClusterCAs(ns string, cas map[string]string) {
	s.cas.Store(ns, cas)
}

func (s *standIn) clusterCAs(ns string) map[string]string {
	if cas, ok := s.cas.Load(ns); ok {
		return cas.(map[string]string)
	}
	return nil
}

// hostPort is the "..port" end of a CA key, which stands for ":port".
var hostPort = regexp.MustCompile(`\.\.(\d+)$`)

// run reconciles every Build once per tick until ctx is done.
func (s *standIn) run(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := s.dyn.Resource(buildsResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			_ = s.handle(ctx, &list.Items[i])
		}
	}
}

func (s *standIn) handle(ctx context.Context, b *unstructured.Unstructured) error {
	phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
	cancelled, _, _ := unstructured.NestedBool(b.Object, "status", "cancelled")
	typ, _, _ := unstructured.NestedString(b.Object, "spec", "strategy", "type")
	if typ != "Custom" {
		return nil
	}
	podName := b.GetName() + "-build"
	switch phase {
	case "", "New":
		if cancelled {
			return s.transition(ctx, b, "Cancelled", "CancelledBuild", "The build was cancelled by the user.")
		}
		pod, err := customPod(b, s.clusterCAs(b.GetNamespace()))
		if err != nil {
			return s.transition(ctx, b, "Error", "CannotCreateBuildPodSpec", "Failed to create pod spec.")
		}
		created, err := s.kube.CoreV1().Pods(b.GetNamespace()).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = s.kube.CoreV1().Pods(b.GetNamespace()).Get(ctx, pod.Name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		if err := s.createSystemConfigs(ctx, b, created); err != nil {
			return err
		}
		if err := s.createConfigMap(ctx, b.GetNamespace(), b.GetName()+"-ca", created, s.clusterCAs(b.GetNamespace())); err != nil {
			return err
		}
		ann := b.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["openshift.io/build.pod-name"] = podName
		b.SetAnnotations(ann)
		return s.transition(ctx, b, "Pending", "", "")
	case "Pending", "Running":
		if cancelled {
			err := s.kube.CoreV1().Pods(b.GetNamespace()).Delete(ctx, podName, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return s.transition(ctx, b, "Cancelled", "CancelledBuild", "The build was cancelled by the user.")
		}
		pod, err := s.kube.CoreV1().Pods(b.GetNamespace()).Get(ctx, podName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return s.transition(ctx, b, "Error", "BuildPodDeleted", "The pod for this build was deleted before the build completed.")
		}
		if err != nil {
			return err
		}
		switch pod.Status.Phase {
		case corev1.PodRunning:
			if phase != "Running" {
				return s.transition(ctx, b, "Running", "", "")
			}
		case corev1.PodSucceeded:
			return s.transition(ctx, b, "Complete", "", "")
		case corev1.PodFailed:
			return s.transition(ctx, b, "Failed", "GenericBuildFailed", "Generic Build failure - check logs for details.")
		}
	}
	return nil
}

// createSystemConfigs makes the Build's <build>-sys-config ConfigMap, owned
// by its pod, with the cluster's registry files (none: no data).
func (s *standIn) createSystemConfigs(ctx context.Context, b *unstructured.Unstructured, pod *corev1.Pod) error {
	data := map[string]string{}
	if files, ok := s.registries.Load(b.GetNamespace()); ok {
		for _, k := range []string{registriesConfKey, signaturePolicyKey} {
			if v := files.(map[string]string)[k]; v != "" {
				data[k] = v
			}
		}
	}
	return s.createConfigMap(ctx, b.GetNamespace(), b.GetName()+"-sys-config", pod, data)
}

// createConfigMap makes a ConfigMap of a Build owned by its pod, unless it
// exists.
func (s *standIn) createConfigMap(ctx context.Context, ns, name string, pod *corev1.Pod, data map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			}},
		},
		Data: data,
	}
	_, err := s.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// transition updates the Build's phase, reason and message with an update
// of the whole Build, as OpenShift's controller does.
func (s *standIn) transition(ctx context.Context, b *unstructured.Unstructured, phase, reason, msg string) error {
	_ = unstructured.SetNestedField(b.Object, phase, "status", "phase")
	_ = unstructured.SetNestedField(b.Object, reason, "status", "reason")
	_ = unstructured.SetNestedField(b.Object, msg, "status", "message")
	_, err := s.dyn.Resource(buildsResource).Namespace(b.GetNamespace()).Update(ctx, b, metav1.UpdateOptions{})
	return err
}

// customPod is the pod OpenShift's CustomBuildStrategy.CreateBuildPod makes
// for a Custom-strategy Build, given the cluster's additional trusted
// registry CAs.
func customPod(b *unstructured.Unstructured, cas map[string]string) (*corev1.Pod, error) {
	var build struct {
		Spec struct {
			ServiceAccount string `json:"serviceAccount"`
			Source         struct {
				Git *struct {
					URI string `json:"uri"`
					Ref string `json:"ref"`
				} `json:"git"`
				ContextDir   string                       `json:"contextDir"`
				SourceSecret *corev1.LocalObjectReference `json:"sourceSecret"`
			} `json:"source"`
			Strategy struct {
				CustomStrategy *struct {
					From               corev1.ObjectReference       `json:"from"`
					PullSecret         *corev1.LocalObjectReference `json:"pullSecret"`
					Env                []corev1.EnvVar              `json:"env"`
					ExposeDockerSocket bool                         `json:"exposeDockerSocket"`
					ForcePull          bool                         `json:"forcePull"`
				} `json:"customStrategy"`
			} `json:"strategy"`
			Output struct {
				To         *corev1.ObjectReference      `json:"to"`
				PushSecret *corev1.LocalObjectReference `json:"pushSecret"`
			} `json:"output"`
			Resources                 corev1.ResourceRequirements `json:"resources"`
			CompletionDeadlineSeconds *int64                      `json:"completionDeadlineSeconds"`
			NodeSelector              map[string]string           `json:"nodeSelector"`
		} `json:"spec"`
	}
	raw, err := json.Marshal(b.Object)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &build); err != nil {
		return nil, err
	}
	cs := build.Spec.Strategy.CustomStrategy
	if cs == nil || cs.From.Name == "" {
		return nil, fmt.Errorf("CustomBuildStrategy cannot be executed without image")
	}
	// BUILD is the Build as the legacy codec encodes it: with its
	// apiVersion and kind.
	env := []corev1.EnvVar{{Name: "BUILD", Value: string(raw)}, {Name: "LANG", Value: "C.utf8"}}
	if g := build.Spec.Source.Git; g != nil {
		env = append(env, corev1.EnvVar{Name: "SOURCE_REPOSITORY", Value: g.URI}, corev1.EnvVar{Name: "SOURCE_URI", Value: g.URI})
	}
	if build.Spec.Source.ContextDir != "" {
		env = append(env, corev1.EnvVar{Name: "SOURCE_CONTEXT_DIR", Value: build.Spec.Source.ContextDir})
	}
	if g := build.Spec.Source.Git; g != nil && g.Ref != "" {
		env = append(env, corev1.EnvVar{Name: "SOURCE_REF", Value: g.Ref})
	}
	if to := build.Spec.Output.To; to != nil {
		registry, image, _ := strings.Cut(to.Name, "/")
		env = append(env, corev1.EnvVar{Name: "OUTPUT_REGISTRY", Value: registry}, corev1.EnvVar{Name: "OUTPUT_IMAGE", Value: image})
	}
	env = append(env, cs.Env...)
	if cs.ExposeDockerSocket {
		env = append(env, corev1.EnvVar{Name: "DOCKER_SOCKET", Value: "/var/run/docker.sock"})
	}
	sa := build.Spec.ServiceAccount
	if sa == "" {
		sa = "builder"
	}
	pull := corev1.PullIfNotPresent
	if cs.ForcePull {
		pull = corev1.PullAlways
	}
	deadline := build.Spec.CompletionDeadlineSeconds
	if deadline == nil {
		deadline = ptr.To[int64](604800)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        b.GetName() + "-build",
			Namespace:   b.GetNamespace(),
			Labels:      map[string]string{"openshift.io/build.name": b.GetName()},
			Annotations: map[string]string{"openshift.io/build.name": b.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "build.openshift.io/v1", Kind: "Build", Name: b.GetName(), UID: b.GetUID(), Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			Containers: []corev1.Container{{
				Name:                     "custom-build",
				Image:                    cs.From.Name,
				Env:                      env,
				SecurityContext:          &corev1.SecurityContext{Privileged: ptr.To(true)},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				ImagePullPolicy:          pull,
				Resources:                build.Spec.Resources,
			}},
			RestartPolicy:         corev1.RestartPolicyNever,
			NodeSelector:          build.Spec.NodeSelector,
			ActiveDeadlineSeconds: deadline,
		},
	}
	c := &pod.Spec.Containers[0]
	mount := func(volume, secret, path string) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: path, ReadOnly: true})
	}
	if s := build.Spec.Output.PushSecret; s != nil {
		mount(s.Name+"-push", s.Name, "/var/run/secrets/openshift.io/push")
		c.Env = append(c.Env, corev1.EnvVar{Name: "PUSH_DOCKERCFG_PATH", Value: "/var/run/secrets/openshift.io/push"})
	}
	if s := cs.PullSecret; s != nil {
		mount(s.Name+"-pull", s.Name, "/var/run/secrets/openshift.io/pull")
		c.Env = append(c.Env, corev1.EnvVar{Name: "PULL_DOCKERCFG_PATH", Value: "/var/run/secrets/openshift.io/pull"})
	}
	if s := build.Spec.Source.SourceSecret; s != nil {
		mount(s.Name+"-source", s.Name, "/var/run/secrets/openshift.io/source")
		c.Env = append(c.Env, corev1.EnvVar{Name: "SOURCE_SECRET_PATH", Value: "/var/run/secrets/openshift.io/source"})
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: buildSystemConfigsVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: b.GetName() + "-sys-config"}}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: buildSystemConfigsVolume, MountPath: buildSystemConfigsDir, ReadOnly: true})
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "BUILD_REGISTRIES_CONF_PATH", Value: buildSystemConfigsDir + "/" + registriesConfKey},
		corev1.EnvVar{Name: "BUILD_REGISTRIES_DIR_PATH", Value: buildSystemConfigsDir + "/registries.d"},
		corev1.EnvVar{Name: "BUILD_SIGNATURE_POLICY_PATH", Value: buildSystemConfigsDir + "/" + signaturePolicyKey},
		corev1.EnvVar{Name: "BUILD_STORAGE_CONF_PATH", Value: buildSystemConfigsDir + "/storage.conf"})
	caSource := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: b.GetName() + "-ca"}}
	for _, key := range slices.Sorted(maps.Keys(cas)) {
		caSource.Items = append(caSource.Items, corev1.KeyToPath{
			Key: key, Path: "certs.d/" + hostPort.ReplaceAllString(key, ":$1") + "/ca.crt"})
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: buildCAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: caSource}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: buildCAVolume, MountPath: buildCADir})
	return pod, nil
}
