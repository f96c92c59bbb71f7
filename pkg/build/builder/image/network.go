package image

import (
	"errors"

	nettypes "go.podman.io/common/libnetwork/types"
)

// errNoNetworks is what the stub network backend answers to any request
// for a network of its own.
var errNoNetworks = errors.New("archway's builder runs build steps in the host's network and manages no networks")

// hostNetwork is the network backend handed to buildah. Build steps run in
// the host's (the build pod's) network namespace, so buildah never asks it
// to set a network up; without a backend of its own buildah would look for
// netavark or CNI plugins, which build pods do not have.
type hostNetwork struct{}

var _ nettypes.ContainerNetwork = hostNetwork{}

func (hostNetwork) NetworkCreate(nettypes.Network, *nettypes.NetworkCreateOptions) (nettypes.Network, error) {
	return nettypes.Network{}, errNoNetworks
}

func (hostNetwork) NetworkUpdate(string, nettypes.NetworkUpdateOptions) error { return errNoNetworks }

func (hostNetwork) NetworkRemove(string) error { return errNoNetworks }

func (hostNetwork) NetworkList(...nettypes.FilterFunc) ([]nettypes.Network, error) { return nil, nil }

func (hostNetwork) NetworkInspect(string) (nettypes.Network, error) {
	return nettypes.Network{}, errNoNetworks
}

func (hostNetwork) Setup(string, nettypes.SetupOptions) (map[string]nettypes.StatusBlock, error) {
	return nil, errNoNetworks
}

func (hostNetwork) Teardown(string, nettypes.TeardownOptions) error { return nil }

func (hostNetwork) RunInRootlessNetns(func() error) error { return errNoNetworks }

func (hostNetwork) RootlessNetnsInfo() (*nettypes.RootlessNetnsInfo, error) {
	return nil, errNoNetworks
}

func (hostNetwork) PestoSocketPath() string { return "" }

func (hostNetwork) Drivers() []string { return nil }

func (hostNetwork) DefaultNetworkName() string { return "host" }

func (hostNetwork) NetworkInfo() nettypes.NetworkInfo {
	return nettypes.NetworkInfo{Backend: nettypes.NetworkBackend("host")}
}
