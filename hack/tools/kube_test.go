// Package tools holds the Go modules hack/tools.sh builds the test bed's
// tools from, one module a directory.
package tools

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// kubeVersionsMayDiffer are the modules hack/tools/kube/go.mod may hold at
// another version than archway's go.mod: no package of theirs is in both
// Kubernetes' build and archway's (containerd's CRI client and its
// transport serve only the kubelet; otelgrpc only Kubernetes' gRPC).
var kubeVersionsMayDiffer = map[string]bool{
	"github.com/containerd/containerd/api":                                        true,
	"github.com/containerd/ttrpc":                                                 true,
	"github.com/mdlayher/socket":                                                  true,
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc": true,
}

// TestKubeSharesArchwaysVersions checks that the kube tools module
// requires archway's version of every module both require: hack/tools.sh
// builds Kubernetes as archway's packages are built, so that the packages
// they share (about half of archway's) compile once on a new machine, and
// one version apart breaks that for every package above it.
func TestKubeSharesArchwaysVersions(t *testing.T) {
	archway := requires(t, filepath.Join("..", "..", "go.mod"))
	kube := requires(t, filepath.Join("kube", "go.mod"))
	if len(kube) == 0 || len(archway) == 0 {
		t.Fatal("no requirements read")
	}
	for path, v := range kube {
		av, ok := archway[path]
		// v0.0.0 are Kubernetes' staging modules, replaced by their
		// released versions.
		if !ok || v == "v0.0.0" || kubeVersionsMayDiffer[path] {
			continue
		}
		if av != v {
			t.Errorf("hack/tools/kube/go.mod requires %s %s, archway's go.mod %s: run (cd hack/tools/kube && go get %s@%s && go mod tidy)", path, v, av, path, av)
		}
	}
}

func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range f.Require {
		m[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if _, ok := m[r.Old.Path]; ok && r.New.Version != "" {
			m[r.Old.Path] = r.New.Version
		}
	}
	return m
}

// kwokVersionsMayDiffer are the modules hack/tools/kwok/go.mod holds at a
// newer version than the kube tools module because kwok needs it.
var kwokVersionsMayDiffer = map[string]bool{
	"github.com/go-errors/errors": true,
}

// TestKwokSharesKubesVersions checks that the kwok tools module requires
// the kube tools module's version of every module both require: kwok is
// built after kube-apiserver as it is built (cgo on, the same tags), so
// that the Kubernetes libraries it shares with it (client-go and the
// packages below it) compile once on a new machine.
func TestKwokSharesKubesVersions(t *testing.T) {
	kube := requires(t, filepath.Join("kube", "go.mod"))
	kwok := requires(t, filepath.Join("kwok", "go.mod"))
	if len(kube) == 0 || len(kwok) == 0 {
		t.Fatal("no requirements read")
	}
	shared := 0
	for path, v := range kwok {
		kv, ok := kube[path]
		if !ok || kv == "v0.0.0" || kwokVersionsMayDiffer[path] {
			continue
		}
		shared++
		if kv != v {
			t.Errorf("hack/tools/kwok/go.mod requires %s %s, hack/tools/kube/go.mod %s: run (cd hack/tools/kwok && go get %s@%s && go mod tidy)", path, v, kv, path, kv)
		}
	}
	if shared == 0 {
		t.Error("kwok and kube share no module: is a go.mod misread?")
	}
}
