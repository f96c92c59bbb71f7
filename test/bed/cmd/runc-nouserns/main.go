// Command runc-nouserns is runc as a runtime that ignores user namespaces
// behaves (containerd 1.6 with runc 1.1 ignores a pod's hostUsers: false):
// before `runc create` or `runc run` it removes the user namespace and every
// uid/gid mapping from the bundle's config.json, then runs the real runc
// (the first runc on PATH) with the same arguments. Every other command
// (features, state, kill, delete...) goes to runc unchanged, so containerd
// and the kubelet still see a runtime that supports user namespaces. The
// bed's real node offers it as runtime handler runc-nouserns (RuntimeClass
// bed.NoUserNamespaceRuntimeClass), for tests of what runs on such nodes.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
)

func main() {
	runc, err := exec.LookPath("runc")
	if err != nil {
		fail(err)
	}
	args := os.Args[1:]
	if bundle, ok := createBundle(args); ok {
		if err := dropUserNamespace(filepath.Join(bundle, "config.json")); err != nil {
			fail(err)
		}
	}
	fail(syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ()))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "runc-nouserns:", err)
	os.Exit(1)
}

// createBundle finds the bundle directory of a create or run command: the
// value of --bundle/-b, else the working directory.
func createBundle(args []string) (string, bool) {
	create := false
	bundle := ""
	for i, a := range args {
		switch {
		case a == "create" || a == "run":
			create = true
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
		case len(a) > len("--bundle=") && a[:len("--bundle=")] == "--bundle=":
			bundle = a[len("--bundle="):]
		}
	}
	if !create {
		return "", false
	}
	if bundle == "" {
		bundle, _ = os.Getwd()
	}
	return bundle, true
}

// dropUserNamespace rewrites an OCI runtime config without the user
// namespace, the process-wide id mappings and the mounts' id mappings.
func dropUserNamespace(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if linux, ok := spec["linux"].(map[string]any); ok {
		delete(linux, "uidMappings")
		delete(linux, "gidMappings")
		if nss, ok := linux["namespaces"].([]any); ok {
			linux["namespaces"] = slices.DeleteFunc(nss, func(ns any) bool {
				m, ok := ns.(map[string]any)
				return ok && m["type"] == "user"
			})
		}
	}
	if mounts, ok := spec["mounts"].([]any); ok {
		for _, m := range mounts {
			mount, ok := m.(map[string]any)
			if !ok {
				continue
			}
			delete(mount, "uidMappings")
			delete(mount, "gidMappings")
			if opts, ok := mount["options"].([]any); ok {
				mount["options"] = slices.DeleteFunc(opts, func(o any) bool { return o == "idmap" || o == "ridmap" })
			}
		}
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}
