package v1

import corev1 "k8s.io/api/core/v1"

// The options the Docker and Source strategies share, read from whichever
// the strategy holds: the build controller (pods, preflight) and the
// builder read them so, whatever the strategy.

// StrategyPullSecret returns the pull secret the strategy names, nil for
// none.
func (s *BuildStrategy) StrategyPullSecret() *corev1.LocalObjectReference {
	switch {
	case s.DockerStrategy != nil:
		return s.DockerStrategy.PullSecret
	case s.SourceStrategy != nil:
		return s.SourceStrategy.PullSecret
	}
	return nil
}

// StrategyEnv returns the strategy's env.
func (s *BuildStrategy) StrategyEnv() []corev1.EnvVar {
	switch {
	case s.DockerStrategy != nil:
		return s.DockerStrategy.Env
	case s.SourceStrategy != nil:
		return s.SourceStrategy.Env
	}
	return nil
}

// StrategyVolumes returns the strategy's build volumes.
func (s *BuildStrategy) StrategyVolumes() []BuildVolume {
	switch {
	case s.DockerStrategy != nil:
		return s.DockerStrategy.Volumes
	case s.SourceStrategy != nil:
		return s.SourceStrategy.Volumes
	}
	return nil
}

// StrategyLayerCache returns the strategy's own layer cache, nil for none.
func (s *BuildStrategy) StrategyLayerCache() *LayerCache {
	switch {
	case s.DockerStrategy != nil:
		return s.DockerStrategy.LayerCache
	case s.SourceStrategy != nil:
		return s.SourceStrategy.LayerCache
	}
	return nil
}
