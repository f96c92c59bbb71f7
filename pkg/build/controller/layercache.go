package controller

import (
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

// ResolveLayerCache returns the layer cache a Docker build's pods use: the
// strategy's own, its mode defaulted from the configuration, or nil when
// the cache is off. The repository is left as the build has it; the
// builder derives it from the output when it is empty, and adds each
// platform's suffix.
func ResolveLayerCache(own *buildv1.LayerCache, cfg configv1alpha1.LayerCacheConfig) *buildv1.LayerCache {
	out := buildv1.LayerCache{Mode: cfg.Mode}
	if own != nil {
		out.Repository = own.Repository
		if own.Mode != "" {
			out.Mode = own.Mode
		}
	}
	if out.Mode != buildv1.LayerCacheRegistry {
		return nil
	}
	return &out
}
