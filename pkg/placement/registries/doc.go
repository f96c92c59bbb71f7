// Package registries gives image inspection for placement, and builds,
// the registry configuration the nodes pull with: mirrors, blocked and
// insecure registries, and the CAs registries are trusted with.
// build-controller watches it once and hands its registries.conf to every
// build pod, so that a build pulls through the mirrors placement inspects
// with.
//
// Its sources are a registries.conf (v2) ConfigMap in archway's namespace,
// OpenShift's ImageDigestMirrorSets and ImageTagMirrorSets when the cluster
// serves them, the configured insecure registries, a global CA bundle
// ConfigMap and a ConfigMap of per-registry CA bundles. Build turns them
// into one registries.conf and a certificate directory, which
// containers/image (sysregistriesv2) then resolves as a node's CRI-O does:
// a digest reference tries its digest mirrors then the source, a tag
// reference its tag mirrors then the source, a blocked source is never
// contacted.
package registries
