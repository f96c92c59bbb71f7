// Package s2i turns one platform's Source (source-to-image) build into a
// Dockerfile build, as OpenShift's builder runs S2I without a daemon: from
// the builder image of the pod's platform (its labels and config), the
// scripts (the strategy's scripts URL, else the image's
// io.openshift.s2i.scripts-url label; .s2i/bin in the source overrides
// either), the source's .s2i/environment and the strategy's env, it writes
// a build context and a Dockerfile that the Docker strategy's buildah path
// builds. source-to-image's own Dockerfile strategy
// (github.com/openshift/source-to-image) does the S2I part: script
// resolution, labels, environment files, .s2iignore and the Dockerfile;
// this package chooses its inputs, guards them, and makes its output
// deterministic, so the layer cache and result keys see the same
// Dockerfile for the same inputs.
package s2i

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	s2iapi "github.com/openshift/source-to-image/pkg/api"
	s2iconstants "github.com/openshift/source-to-image/pkg/api/constants"
	s2idockerfile "github.com/openshift/source-to-image/pkg/build/strategies/dockerfile"
	s2itar "github.com/openshift/source-to-image/pkg/tar"
	s2ifs "github.com/openshift/source-to-image/pkg/util/fs"

	"github.com/archway-build/archway/pkg/build/builder/image"
)

// The builder image labels a Source build reads (OpenShift's names).
const (
	ScriptsURLLabel   = s2iconstants.ScriptsURLLabel
	DestinationLabel  = s2iconstants.DestinationLabel
	AssembleUserLabel = s2iconstants.AssembleUserLabel
)

// Inputs are one platform's Source build.
type Inputs struct {
	// SourceDir is the fetched source's context directory. Prepare moves
	// it into the build context.
	SourceDir string
	// Dir is where the build context is made; it must not exist or be
	// empty, and must be on SourceDir's file system.
	Dir string
	// Builder is the builder image of the platform: the Dockerfile starts
	// FROM its Reference, and its labels and config choose the scripts,
	// their destination and the assemble user.
	Builder image.PlatformImage
	// ScriptsURL is the strategy's scripts: image:///path (a directory in
	// the builder image) or an http(s) URL of a directory holding
	// assemble, run and save-artifacts. Default: the builder image's
	// io.openshift.s2i.scripts-url label.
	ScriptsURL string
	// Env are the strategy's environment variables, KEY=VALUE, which win
	// over the source's .s2i/environment. Both are set for assemble and
	// in the image.
	Env []string
	// IncrementalFrom is the previous image of the platform, by digest,
	// for an incremental build: its save-artifacts output is restored in
	// the destination's artifacts directory before assemble. "" builds
	// in full.
	IncrementalFrom string
	// Secrets are the Build's source.secrets, given to assemble alone.
	Secrets []Input
	// ConfigMaps are the Build's source.configMaps: as OpenShift's
	// builder injects them, their keys are copied into DestinationDir
	// (relative to the working directory, or absolute), owned by the
	// assemble user, before assemble, and stay in the image.
	ConfigMaps []Input
}

// Input is one of a Build's source.secrets or source.configMaps. Each key
// of a Secret is given to the assemble step as a file in DestinationDir,
// as OpenShift's builder gives them, and is left out of the image:
// OpenShift copies the keys in before assemble and removes them after it,
// in a build it commits as one layer; archway mounts each key for the
// assemble step alone (RUN --mount=type=secret), so that no layer, cached
// or pushed, ever holds it. A ConfigMap's keys are copied in and stay.
type Input struct {
	// Name is the Secret's or ConfigMap's name.
	Name string
	// Dir is where the build pod has it mounted: one file per key.
	Dir string
	// DestinationDir is the directory assemble finds the keys in: relative
	// to the builder image's working directory (its WORKDIR, else
	// source-to-image's /opt/app-root/src), or absolute. Default: that
	// working directory.
	DestinationDir string
}

// Prepared is a Source build ready for the Docker strategy's build.
type Prepared struct {
	// ContextDir is the build context: upload/src (the source),
	// upload/scripts (the scripts from a URL or .s2i/bin) and the
	// Dockerfile.
	ContextDir string
	// Dockerfile is the generated Dockerfile's path.
	Dockerfile string
	// AssembleUser is the user assemble runs as.
	AssembleUser string
	// Secrets are the secrets the Dockerfile's assemble step mounts, as
	// buildah takes them (id=ID,src=FILE): image.Request.Secrets.
	Secrets []string
	// SecretFiles are where assemble finds the secrets' keys, sorted.
	SecretFiles []string
}

// Error is a Source build that cannot be prepared: a bad scripts URL, a
// source whose S2I files are not plain files, scripts that cannot be
// fetched.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Prepare writes in.Dir's build context and Dockerfile.
func Prepare(in Inputs) (Prepared, error) {
	if err := CheckScriptsURL(in.ScriptsURL); err != nil {
		return Prepared{}, &Error{err}
	}
	if err := checkS2IFiles(in.SourceDir); err != nil {
		return Prepared{}, &Error{err}
	}
	dir, err := filepath.Abs(in.Dir)
	if err != nil {
		return Prepared{}, err
	}
	// The source goes where source-to-image's Dockerfile strategy finds it
	// after its own download (upload/src): moved, not copied, and not
	// downloaded again by source-to-image (which would follow symbolic
	// links out of the source).
	upload := filepath.Join(dir, filepath.Dir(s2iconstants.Source))
	if err := os.MkdirAll(upload, 0o755); err != nil {
		return Prepared{}, err
	}
	if err := os.Rename(in.SourceDir, filepath.Join(dir, s2iconstants.Source)); err != nil {
		return Prepared{}, fmt.Errorf("moving the source into the build context: %w", err)
	}
	// As source-to-image's own download: without .git (a clone's, which
	// differs between clones of one commit and would change every key).
	if err := removeExcluded(filepath.Join(dir, s2iconstants.Source)); err != nil {
		return Prepared{}, err
	}
	labels := in.Builder.Config.Labels
	if labels == nil {
		// Non-nil: the scripts are the image's, never fetched by the
		// image's label.
		labels = map[string]string{}
	}
	assembleUser := labels[AssembleUserLabel]
	if assembleUser == "" {
		assembleUser = in.Builder.Config.User
	}
	cfg := &s2iapi.Config{
		BuilderImage:       in.Builder.Reference,
		BuilderImageLabels: labels,
		ScriptsURL:         in.ScriptsURL,
		Destination:        labels[DestinationLabel],
		AssembleUser:       assembleUser,
		ImageWorkDir:       in.Builder.Config.WorkingDir,
		AsDockerfile:       filepath.Join(dir, "Dockerfile"),
		KeepSymlinks:       true,
		Incremental:        in.IncrementalFrom != "",
		IncrementalFromTag: in.IncrementalFrom,
	}
	if cfg.Injections, err = stageConfigMaps(in.ConfigMaps, dir+".configmaps"); err != nil {
		return Prepared{}, &Error{err}
	}
	for _, kv := range in.Env {
		if err := cfg.Environment.Set(kv); err != nil {
			return Prepared{}, &Error{fmt.Errorf("environment variable: %w", err)}
		}
	}
	builder, err := s2idockerfile.New(cfg, s2ifs.NewFileSystem())
	if err != nil {
		return Prepared{}, err
	}
	result, err := builder.Build(cfg)
	if err != nil {
		return Prepared{}, &Error{fmt.Errorf("source-to-image: %w", err)}
	}
	if result != nil && !result.Success {
		return Prepared{}, &Error{fmt.Errorf("source-to-image: %s", result.BuildInfo.FailureReason.Message)}
	}
	if err := sortLabels(cfg.AsDockerfile); err != nil {
		return Prepared{}, err
	}
	prepared := Prepared{ContextDir: dir, Dockerfile: cfg.AsDockerfile, AssembleUser: cfg.AssembleUser}
	if len(in.Secrets) > 0 {
		// cfg.ImageWorkDir is the builder image's WORKDIR, or what
		// source-to-image defaulted it to.
		mounts, err := secretMounts(in.Secrets, cfg.ImageWorkDir, cfg.AssembleUser)
		if err != nil {
			return Prepared{}, &Error{err}
		}
		if err := mountForAssemble(cfg.AsDockerfile, mounts); err != nil {
			return Prepared{}, err
		}
		for _, m := range mounts {
			prepared.Secrets = append(prepared.Secrets, "id="+m.id+",src="+m.src)
			prepared.SecretFiles = append(prepared.SecretFiles, m.target)
		}
		slices.Sort(prepared.SecretFiles)
	}
	return prepared, nil
}

// secretMount is one key of a Secret, mounted for assemble.
type secretMount struct {
	id, src, target string
	uid             string
	mode            fs.FileMode
}

// safePath is what a secret's target may hold: it is written into a RUN
// instruction's --mount flag, whose options a comma separates, and which
// ends at a space.
var safePath = regexp.MustCompile(`^[A-Za-z0-9._/@+-]+$`)

// secretMounts lists the keys of secrets, as mounted in the build pod, and
// where assemble finds each (a later Secret's key wins a file both name).
// The keys' owner is the assemble user (when numeric; root otherwise, with
// the keys readable by all), their group root, and their mode the pod's,
// as OpenShift copies them in and gives them to the assemble user.
func secretMounts(secrets []Input, workDir, assembleUser string) ([]secretMount, error) {
	if workDir == "" {
		workDir = "/"
	}
	uid, _, _ := strings.Cut(assembleUser, ":")
	if _, err := strconv.ParseUint(uid, 10, 32); err != nil {
		uid = ""
	}
	var mounts []secretMount
	byTarget := map[string]int{}
	for _, s := range secrets {
		dest, err := destination("secret", s, workDir)
		if err != nil {
			return nil, err
		}
		keys, err := mountedKeys("secret", s)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if strings.ContainsAny(k.src, ",=") {
				return nil, fmt.Errorf("secret %s: key %q cannot be mounted for assemble (its path %s)", s.Name, k.name, k.src)
			}
			m := secretMount{src: k.src, target: path.Join(dest, k.name), uid: uid, mode: k.mode}
			if uid == "" {
				m.mode |= 0o444
			}
			if i, ok := byTarget[m.target]; ok {
				m.id = mounts[i].id
				mounts[i] = m
				continue
			}
			m.id = "s2i-secret-" + strconv.Itoa(len(mounts))
			byTarget[m.target] = len(mounts)
			mounts = append(mounts, m)
		}
	}
	return mounts, nil
}

// destination is where assemble finds in's keys: its destinationDir,
// relative to workDir or absolute. It must not leave workDir by "..", and
// must hold only safePath's characters (a mount flag's or COPY's
// argument).
func destination(kind string, in Input, workDir string) (string, error) {
	dest := path.Clean("/" + in.DestinationDir)
	if !path.IsAbs(in.DestinationDir) {
		if rel := path.Clean(in.DestinationDir); strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("%s %s: destinationDir %q must not start with \"..\"", kind, in.Name, in.DestinationDir)
		}
		dest = path.Join(workDir, in.DestinationDir)
	}
	if !safePath.MatchString(dest) {
		return "", fmt.Errorf("%s %s: destinationDir %q: with strategy Source it may hold only letters, digits and . _ - + @ / "+
			"(assemble finds the keys at %s)", kind, in.Name, in.DestinationDir, dest)
	}
	return dest, nil
}

// key is one key of a mounted Secret or ConfigMap.
type key struct {
	name, src string
	mode      fs.FileMode
}

// mountedKeys lists the keys of in as the build pod has it mounted: the
// regular files of in.Dir, without the kubelet's ..data and timestamped
// directories.
func mountedKeys(kind string, in Input) ([]key, error) {
	entries, err := os.ReadDir(in.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s %s is not mounted at %s: %w", kind, in.Name, in.Dir, err)
	}
	var keys []key
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		src := filepath.Join(in.Dir, e.Name())
		info, err := os.Stat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if !safePath.MatchString(e.Name()) {
			return nil, fmt.Errorf("%s %s: key %q cannot be given to assemble", kind, in.Name, e.Name())
		}
		keys = append(keys, key{name: e.Name(), src: src, mode: info.Mode().Perm()})
	}
	return keys, nil
}

// stageConfigMaps copies each ConfigMap's keys, as plain files, into a
// directory of its own under dir, and returns them as source-to-image's
// kept injections: it copies each into the image at its destinationDir
// (relative to the working directory, or absolute) before assemble, and
// gives it to the assemble user, as OpenShift's builder does.
func stageConfigMaps(configMaps []Input, dir string) (s2iapi.VolumeList, error) {
	if len(configMaps) == 0 {
		return nil, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	var out s2iapi.VolumeList
	for i, cm := range configMaps {
		// The working directory is checked by the Dockerfile strategy's
		// own resolution; "/" stands for it here.
		if _, err := destination("configMap", cm, "/"); err != nil {
			return nil, err
		}
		keys, err := mountedKeys("configMap", cm)
		if err != nil {
			return nil, err
		}
		stage := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(stage, 0o755); err != nil {
			return nil, err
		}
		for _, k := range keys {
			data, err := os.ReadFile(k.src)
			if err != nil {
				return nil, fmt.Errorf("configMap %s: %w", cm.Name, err)
			}
			if err := os.WriteFile(filepath.Join(stage, k.name), data, k.mode|0o400); err != nil { //nolint:gosec // G703: k.name is a key of the mounted ConfigMap, checked against safePath, written in the stage directory Prepare owns
				return nil, err
			}
		}
		dest := cm.DestinationDir
		if dest == "" {
			dest = "."
		}
		out = append(out, s2iapi.VolumeSpec{Source: stage, Destination: dest, Keep: true})
	}
	return out, nil
}

// mountForAssemble gives the assemble step of the Dockerfile at path (the
// RUN of an assemble script in the last stage, which source-to-image
// writes once) a secret mount for each of mounts.
func mountForAssemble(path string, mounts []secretMount) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(data), "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			last = i
		}
	}
	assemble := -1
	for i := last + 1; last >= 0 && i < len(lines); i++ {
		l := strings.TrimSuffix(lines[i], "\n")
		if strings.HasPrefix(l, "RUN ") && strings.HasSuffix(l, "/assemble") && !strings.ContainsAny(l[len("RUN "):], " \\") {
			if assemble >= 0 {
				return fmt.Errorf("the generated Dockerfile runs assemble twice")
			}
			assemble = i
		}
	}
	if assemble < 0 {
		return fmt.Errorf("the generated Dockerfile has no assemble step to give the secrets to")
	}
	var b strings.Builder
	b.WriteString("RUN")
	for _, m := range mounts {
		uid := m.uid
		if uid == "" {
			uid = "0"
		}
		fmt.Fprintf(&b, " --mount=type=secret,id=%s,target=%s,required=true,uid=%s,gid=0,mode=%04o \\\n   ", m.id, m.target, uid, m.mode)
	}
	b.WriteString(" " + strings.TrimPrefix(lines[assemble], "RUN "))
	lines[assemble] = b.String()
	return os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644) //nolint:gosec // the Dockerfile Prepare wrote in its own build context
}

// removeExcluded removes what source-to-image leaves out of a source it
// downloads (tar.DefaultExclusionPattern: every .git) from src.
func removeExcluded(src string) error {
	root, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	return fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." || !s2itar.DefaultExclusionPattern.MatchString(rel) {
			return err
		}
		if err := root.RemoveAll(rel); err != nil {
			return fmt.Errorf("removing %s from the source: %w", rel, err)
		}
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
}

// CheckScriptsURL refuses a strategy's scripts URL the build pod must not
// read: only a directory of the builder image (image://) or of a web
// server (http, https) may hold the scripts. A file:// URL would copy
// files of the build pod (its mounted secrets among them) into the image.
func CheckScriptsURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("sourceStrategy.scripts %q is not a URL: %w", raw, err)
	}
	switch u.Scheme {
	case "image":
		// source-to-image takes what follows image:// as the directory.
		if !strings.HasPrefix(raw, "image:///") {
			return fmt.Errorf("sourceStrategy.scripts %q names no absolute directory: use image:///usr/libexec/s2i", raw)
		}
		return nil
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("sourceStrategy.scripts %q names no host", raw)
		}
		return nil
	}
	return fmt.Errorf("sourceStrategy.scripts %q: scheme %q is not supported: use image:///directory/in/the/builder/image or an http(s) URL", raw, u.Scheme)
}

// checkS2IFiles refuses a source whose S2I files (.s2i, .s2i/bin and its
// scripts, .s2i/environment, .s2iignore, and their .sti predecessors) are
// symbolic links or other non-regular files: source-to-image reads them
// in the build pod, where a link could lead to the pod's secrets (an
// environment file's values go into the image).
func checkS2IFiles(src string) error {
	for _, dir := range []string{".s2i", ".sti"} {
		for _, name := range []string{dir, filepath.Join(dir, "bin")} {
			info, err := os.Lstat(filepath.Join(src, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if !info.IsDir() {
				return fmt.Errorf("the source's %s is not a directory (a symbolic link or a file): make it a directory", name)
			}
		}
		entries, err := os.ReadDir(filepath.Join(src, dir, "bin"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		names := []string{filepath.Join(dir, s2iconstants.Environment)}
		for _, e := range entries {
			names = append(names, filepath.Join(dir, "bin", e.Name()))
		}
		for _, name := range names {
			if err := regularOrMissing(src, name); err != nil {
				return err
			}
		}
	}
	return regularOrMissing(src, s2iconstants.IgnoreFile)
}

func regularOrMissing(src, name string) error {
	info, err := os.Lstat(filepath.Join(src, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !info.Mode().IsRegular():
		return fmt.Errorf("the source's %s is not a regular file (%s): S2I files must be plain files", name, info.Mode().Type())
	}
	return nil
}

// sortLabels rewrites the Dockerfile's LABEL instruction with its labels
// sorted by name: source-to-image writes them in map order, and the same
// inputs must give the same Dockerfile (the layer cache and result keys
// digest it).
func sortLabels(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(data), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "LABEL ") })
	if start < 0 {
		return nil
	}
	end := start
	for end < len(lines) && strings.HasSuffix(lines[end], "\\\n") {
		end++
	}
	if end == len(lines) {
		return fmt.Errorf("the generated Dockerfile's LABEL instruction does not end")
	}
	var pairs []string
	for _, l := range lines[start : end+1] {
		l = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(l, "LABEL "), "\n"), "\\"))
		if l == "" {
			continue
		}
		key, err := strconv.QuotedPrefix(l)
		if err != nil || !strings.HasPrefix(l[len(key):], "=") {
			return fmt.Errorf("the generated Dockerfile's label %q is not \"name\"=\"value\"", l)
		}
		if _, err := strconv.Unquote(l[len(key)+1:]); err != nil {
			return fmt.Errorf("the generated Dockerfile's label %q is not \"name\"=\"value\"", l)
		}
		pairs = append(pairs, l)
	}
	slices.Sort(pairs)
	label := "LABEL " + strings.Join(pairs, " \\\n      ") + "\n"
	out := strings.Join(lines[:start], "") + label + strings.Join(lines[end+1:], "")
	return os.WriteFile(path, []byte(out), 0o644) //nolint:gosec // the Dockerfile Prepare wrote in its own build context
}
