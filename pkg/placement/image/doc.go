// Package image answers one question at the registry boundary: which
// platforms does an image exist for? Remote asks the registry with
// containers/image; Cache decorates any Registry with digest-keyed caching,
// short-lived tag resolution and single-flight; Keyring picks the
// credentials a kubelet would use for an image from docker config secrets.
// Nothing here holds package-level state: construct what you need and pass
// it in.
package image
