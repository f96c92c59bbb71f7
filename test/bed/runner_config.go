package bed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// permanentError is a problem of a pod spec that waiting cannot fix (an
// unsupported volume type, say): the pod fails. Other configuration errors
// (a Secret that does not exist yet) are retried, as a kubelet does.
type permanentError struct{ error }

func permanent(format string, args ...any) error {
	return permanentError{fmt.Errorf(format, args...)}
}

// containerConfig is what starting a container's process needs.
type containerConfig struct {
	argv    []string
	env     []string
	mounts  []bindMount
	workDir string
	// readOnlyRoot makes the file system outside the container's volumes
	// read-only (securityContext.readOnlyRootFilesystem).
	readOnlyRoot bool
	// caps are the container's capabilities, applied in a user namespace.
	caps []string
}

// bindMount puts src (a file or directory on the host) at dst inside the
// container's mount namespace.
type bindMount struct {
	src, dst string
	readOnly bool
}

// prepare resolves a container's environment, command and mounts, and
// materializes the pod's volumes the first time.
func (p *podRun) prepare(ctx context.Context, c corev1.Container, binary string) (*containerConfig, error) {
	volumes, err := p.materializeVolumes(ctx)
	if err != nil {
		return nil, err
	}
	env, vars, err := p.containerEnv(ctx, c)
	if err != nil {
		return nil, err
	}
	cfg := &containerConfig{env: env, workDir: c.WorkingDir, caps: capabilities(c)}
	if sc := c.SecurityContext; sc != nil && ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		cfg.readOnlyRoot = true
	}
	if cfg.workDir == "" {
		cfg.workDir = "/"
	}
	for _, s := range c.Command {
		cfg.argv = append(cfg.argv, expand(s, vars))
	}
	if len(cfg.argv) == 0 {
		cfg.argv = []string{binary}
	} else if base := filepath.Base(cfg.argv[0]); base == filepath.Base(binary) || base == path.Base(imageRepository(c.Image)) {
		cfg.argv[0] = binary
	}
	for _, s := range c.Args {
		cfg.argv = append(cfg.argv, expand(s, vars))
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, permanent("volume mount %q names no volume of the pod", m.Name)
		}
		src := v.path
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, vars)
		}
		if sub != "" {
			if filepath.IsAbs(sub) || slices.Contains(strings.Split(sub, "/"), "..") {
				return nil, permanent("volume mount %q: subPath %q must be a relative path inside the volume", m.Name, sub)
			}
			src = filepath.Join(src, sub)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		cfg.mounts = append(cfg.mounts, bindMount{src: src, dst: path.Clean(m.MountPath), readOnly: m.ReadOnly || v.readOnly})
	}
	if sa, ok := volumes[serviceAccountVolume]; ok && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return path.Clean(m.MountPath) == serviceAccountMountPath
	}) {
		cfg.mounts = append(cfg.mounts, bindMount{src: sa.path, dst: serviceAccountMountPath, readOnly: true})
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	termFile := p.terminationFile(c.Name)
	if err := os.MkdirAll(filepath.Dir(termFile), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(termFile, nil, 0o666); err != nil {
		return nil, err
	}
	// WriteFile's mode goes through the umask.
	if err := os.Chmod(termFile, 0o666); err != nil {
		return nil, err
	}
	cfg.mounts = append(cfg.mounts, bindMount{src: termFile, dst: path.Clean(termPath)})
	// Parents before children: a volume mounted inside another one lands on
	// top of it.
	slices.SortStableFunc(cfg.mounts, func(a, b bindMount) int {
		return strings.Count(a.dst, "/") - strings.Count(b.dst, "/")
	})
	return cfg, nil
}

func (p *podRun) terminationFile(container string) string {
	return filepath.Join(p.dir, "termination", container)
}

// containerEnv is the environment of a container's process: this
// process's (cleaned), RunnerOptions.Env, then the container's envFrom and
// env. vars holds the variables $(VAR) references may use.
func (p *podRun) containerEnv(ctx context.Context, c corev1.Container) (env []string, vars map[string]string, err error) {
	vars = map[string]string{}
	env = cleanEnv()
	for _, kv := range append(p.apiserverEnv(), p.r.opts.Env...) {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
		env = append(env, kv)
	}
	var own []string // names in order of definition, for env
	setVar := func(name, value string) {
		if _, ok := vars[name]; !ok || !slices.Contains(own, name) {
			own = append(own, name)
		}
		vars[name] = value
	}
	ns := p.pod.Namespace
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := p.r.bed.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(from.ConfigMapRef.Optional, false) {
					continue
				}
				return nil, nil, fmt.Errorf("envFrom: configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := p.r.bed.Clientset.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false) {
					continue
				}
				return nil, nil, fmt.Errorf("envFrom: secret %q: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			return nil, nil, permanent("envFrom: only configMapRef and secretRef are supported")
		}
		for _, k := range sortedKeys(data) {
			name := from.Prefix + k
			if len(validation.IsEnvVarName(name)) == 0 {
				setVar(name, data[k])
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			setVar(e.Name, expand(e.Value, vars))
			continue
		}
		value, ok, err := p.envValueFrom(ctx, c, e.ValueFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			setVar(e.Name, value)
		}
	}
	for _, name := range own {
		env = append(env, name+"="+vars[name])
	}
	return env, vars, nil
}

// envValueFrom resolves one valueFrom; ok is false for an optional source
// that is missing.
func (p *podRun) envValueFrom(ctx context.Context, c corev1.Container, from *corev1.EnvVarSource) (string, bool, error) {
	ns := p.pod.Namespace
	switch {
	case from.FieldRef != nil:
		v, err := p.fieldValue(from.FieldRef.FieldPath, false)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := p.resourceValue(ctx, c, from.ResourceFieldRef)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := p.r.bed.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ptr.Deref(ref.Optional, false) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if ptr.Deref(ref.Optional, false) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, ns, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := p.r.bed.Clientset.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ptr.Deref(ref.Optional, false) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if ptr.Deref(ref.Optional, false) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, ns, ref.Name)
	}
	return "", false, permanent("valueFrom: only fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef are supported")
}

// fieldValue is the downward API's value of a field path; the whole label
// and annotation maps are only for volumes.
func (p *podRun) fieldValue(fieldPath string, volume bool) (string, error) {
	pod := p.pod
	if name, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[name], nil
	}
	if name, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[name], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return podIP, nil
	case "status.podIP", "status.podIPs":
		return p.ip, nil
	}
	if volume {
		switch fieldPath {
		case "metadata.labels":
			return formatMap(pod.Labels), nil
		case "metadata.annotations":
			return formatMap(pod.Annotations), nil
		}
	}
	return "", permanent("fieldRef %q is not supported", fieldPath)
}

// subscript reads "<prefix>['<name>']".
func subscript(fieldPath, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(fieldPath, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap writes a map as the downward API does: key="value" lines,
// sorted, values quoted as Go strings.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue is a container's request or limit in units of the divisor,
// rounded up; an unset limit is the node's allocatable amount, as on a
// kubelet.
func (p *podRun) resourceValue(ctx context.Context, c corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		i := slices.IndexFunc(allContainers(p.pod), func(o corev1.Container) bool { return o.Name == ref.ContainerName })
		if i < 0 {
			return "", permanent("resourceFieldRef: no container %q", ref.ContainerName)
		}
		c = allContainers(p.pod)[i]
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", permanent("resourceFieldRef: resource %q is not supported", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, set := list[corev1.ResourceName(name)]
	if !set && kind == "limits" {
		node, err := p.r.bed.Clientset.CoreV1().Nodes().Get(ctx, p.pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		q = node.Status.Allocatable[corev1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == string(corev1.ResourceCPU) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// expand replaces $(NAME) with the variable's value as Kubernetes does: an
// unknown name stays as written and $$ is a literal $.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += end + 2
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// podVolume is a materialized volume: the host path to bind-mount.
type podVolume struct {
	path     string
	readOnly bool
}

// materializeVolumes writes the pod's volumes under its directory once.
func (p *podRun) materializeVolumes(ctx context.Context) (map[string]podVolume, error) {
	p.mu.Lock()
	done := p.volumes
	p.mu.Unlock()
	if done != nil {
		return done, nil
	}
	out := map[string]podVolume{}
	for _, v := range p.pod.Spec.Volumes {
		dir := filepath.Join(p.dir, "volumes", v.Name)
		src := v.VolumeSource
		var err error
		switch {
		case src.EmptyDir != nil:
			if err = os.MkdirAll(dir, 0o777); err == nil {
				err = os.Chmod(dir, 0o777)
			}
			out[v.Name] = podVolume{path: dir}
		case src.HostPath != nil:
			err = prepareHostPath(src.HostPath)
			out[v.Name] = podVolume{path: src.HostPath.Path}
		case src.Secret != nil, src.ConfigMap != nil, src.DownwardAPI != nil, src.Projected != nil:
			var files []volumeFile
			if files, err = p.volumeFiles(ctx, src); err == nil {
				err = writeVolume(dir, files)
			}
			out[v.Name] = podVolume{path: dir, readOnly: true}
		default:
			err = permanent("volume %q: only emptyDir, hostPath, secret, configMap, downwardAPI and projected volumes are supported", v.Name)
		}
		if err != nil {
			if isPermanent(err) {
				return nil, err
			}
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	if p.automountsServiceAccount() {
		dir := filepath.Join(p.dir, "volumes", serviceAccountVolume)
		files, err := p.serviceAccountFiles(ctx)
		if err == nil {
			err = writeVolume(dir, files)
		}
		if err != nil {
			return nil, fmt.Errorf("the service account's token: %w", err)
		}
		out[serviceAccountVolume] = podVolume{path: dir, readOnly: true}
	}
	p.mu.Lock()
	p.volumes = out
	p.mu.Unlock()
	return out, nil
}

// serviceAccountMountPath is where client-go's in-cluster configuration
// reads the token, the CA and the namespace.
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// serviceAccountVolume names the volume RunnerOptions.InClusterConfig adds
// (a name no pod volume can have: it is not a DNS label).
const serviceAccountVolume = "kube-api-access.runner"

// automountsServiceAccount says whether the pod gets the service account
// volume the ServiceAccount admission plugin would add: with
// RunnerOptions.InClusterConfig, unless the pod opts out.
func (p *podRun) automountsServiceAccount() bool {
	return p.r.opts.InClusterConfig && ptr.Deref(p.pod.Spec.AutomountServiceAccountToken, true)
}

// serviceAccountFiles are the files of the kube-api-access volume: a token
// bound to the pod (an hour, as the admission plugin's 3607 s), the
// apiserver's CA and the namespace.
func (p *podRun) serviceAccountFiles(ctx context.Context) ([]volumeFile, error) {
	files, err := p.tokenFile(ctx, &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}, ptr.To(int32(0o644)))
	if err != nil {
		return nil, err
	}
	return append(files,
		volumeFile{path: "ca.crt", data: p.r.bed.Config.CAData, mode: 0o644},
		volumeFile{path: "namespace", data: []byte(p.pod.Namespace), mode: 0o644}), nil
}

// apiserverEnv is what a kubelet tells every container about the
// apiserver (the kubernetes Service; here the bed's apiserver itself),
// with RunnerOptions.InClusterConfig.
func (p *podRun) apiserverEnv() []string {
	if !p.r.opts.InClusterConfig {
		return nil
	}
	u, err := url.Parse(p.r.bed.Config.Host)
	if err != nil {
		return nil
	}
	return []string{"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port()}
}

func prepareHostPath(hp *corev1.HostPathVolumeSource) error {
	typ := corev1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	st, statErr := os.Stat(hp.Path)
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		if statErr == nil {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(hp.Path, nil, 0o644)
	case corev1.HostPathDirectory:
		if statErr != nil || !st.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", hp.Path)
		}
	case corev1.HostPathFile:
		if statErr != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("hostPath %s is not a file", hp.Path)
		}
	case corev1.HostPathUnset:
		return nil
	default:
		if statErr != nil {
			return statErr
		}
	}
	return nil
}

// volumeFile is one file of a secret, configMap, downwardAPI or projected
// volume.
type volumeFile struct {
	path string
	data []byte
	mode os.FileMode
}

func (p *podRun) volumeFiles(ctx context.Context, src corev1.VolumeSource) ([]volumeFile, error) {
	switch {
	case src.Secret != nil:
		s := src.Secret
		return p.secretFiles(ctx, s.SecretName, s.Items, s.Optional, s.DefaultMode)
	case src.ConfigMap != nil:
		c := src.ConfigMap
		return p.configMapFiles(ctx, c.Name, c.Items, c.Optional, c.DefaultMode)
	case src.DownwardAPI != nil:
		return p.downwardFiles(ctx, src.DownwardAPI.Items, src.DownwardAPI.DefaultMode)
	}
	proj := src.Projected
	var files []volumeFile
	for _, s := range proj.Sources {
		var more []volumeFile
		var err error
		switch {
		case s.Secret != nil:
			more, err = p.secretFiles(ctx, s.Secret.Name, s.Secret.Items, s.Secret.Optional, proj.DefaultMode)
		case s.ConfigMap != nil:
			more, err = p.configMapFiles(ctx, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, proj.DefaultMode)
		case s.DownwardAPI != nil:
			more, err = p.downwardFiles(ctx, s.DownwardAPI.Items, proj.DefaultMode)
		case s.ServiceAccountToken != nil:
			more, err = p.tokenFile(ctx, s.ServiceAccountToken, proj.DefaultMode)
		default:
			err = permanent("projected volume: only secret, configMap, downwardAPI and serviceAccountToken sources are supported")
		}
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

func fileMode(item, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return os.FileMode(corev1.SecretVolumeSourceDefaultMode)
}

// keyFiles turns key/value data into files: every key, or the listed items.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, def *int32, what string, optional bool) ([]volumeFile, error) {
	var files []volumeFile
	if len(items) == 0 {
		for _, k := range sortedKeys(data) {
			files = append(files, volumeFile{path: k, data: data[k], mode: fileMode(nil, def)})
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files = append(files, volumeFile{path: it.Path, data: v, mode: fileMode(it.Mode, def)})
	}
	return files, nil
}

func (p *podRun) secretFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, def *int32) ([]volumeFile, error) {
	s, err := p.r.bed.Clientset.CoreV1().Secrets(p.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && ptr.Deref(optional, false) {
			return nil, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return keyFiles(s.Data, items, def, "secret "+name, ptr.Deref(optional, false))
}

func (p *podRun) configMapFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, def *int32) ([]volumeFile, error) {
	cm, err := p.r.bed.Clientset.CoreV1().ConfigMaps(p.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && ptr.Deref(optional, false) {
			return nil, nil
		}
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := maps.Clone(cm.BinaryData)
	if data == nil {
		data = map[string][]byte{}
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return keyFiles(data, items, def, "configmap "+name, ptr.Deref(optional, false))
}

func (p *podRun) downwardFiles(ctx context.Context, items []corev1.DownwardAPIVolumeFile, def *int32) ([]volumeFile, error) {
	var files []volumeFile
	for _, it := range items {
		var value string
		var err error
		switch {
		case it.FieldRef != nil:
			value, err = p.fieldValue(it.FieldRef.FieldPath, true)
		case it.ResourceFieldRef != nil:
			value, err = p.resourceValue(ctx, corev1.Container{}, it.ResourceFieldRef)
		default:
			err = permanent("downwardAPI item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, volumeFile{path: it.Path, data: []byte(value), mode: fileMode(it.Mode, def)})
	}
	return files, nil
}

// tokenFile asks the TokenRequest API for a token of the pod's service
// account bound to the pod, as a kubelet does for projected tokens.
func (p *podRun) tokenFile(ctx context.Context, src *corev1.ServiceAccountTokenProjection, def *int32) ([]volumeFile, error) {
	sa := p.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: p.pod.Name, UID: p.pod.UID,
		},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tok, err := p.r.bed.Clientset.CoreV1().ServiceAccounts(p.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of service account %q: %w", sa, err)
	}
	return []volumeFile{{path: src.Path, data: []byte(tok.Status.Token), mode: fileMode(nil, def)}}, nil
}

// writeVolume writes files into a fresh dir.
func writeVolume(dir string, files []volumeFile) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if filepath.IsAbs(f.path) || slices.Contains(strings.Split(f.path, "/"), "..") {
			return permanent("volume file path %q must be relative and stay inside the volume", f.path)
		}
		full := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(full, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// isPermanent reports whether err is a permanentError.
func isPermanent(err error) bool {
	var pe permanentError
	return errors.As(err, &pe)
}
