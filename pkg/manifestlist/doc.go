// Package manifestlist assembles the images a multi-platform Build pushed, one
// per platform, into a manifest list (an OCI image index, or a Docker manifest
// list when every image is a Docker schema 2 manifest), pushes it to the
// Build's output tag, and removes the per-platform tags afterwards.
//
// # Where per-platform images go
//
// Each platform's image is pushed to platform.Tag(output, platform): the
// output's repository, with the output's tag and a platform suffix
// ("registry/team/app:v1" -> "registry/team/app:v1-linux-arm64"). The index
// must live in the same repository as the images it lists: a registry accepts
// an index only when every manifest it names is already in its repository.
// The build controller (to tell each build pod where to push) and the builder
// (to untag) both call platform.Tag, so the name is computed in one place.
//
// # Deciding what goes in (pure functions)
//
//   - Select applies platformsAllowedToFail to the platforms' outcomes: every
//     platform that succeeded goes in; a failed platform that is allowed to
//     fail is left out; a failed platform that is not fails the whole list
//     (reason PlatformBuildFailed), as does no platform succeeding
//     (ManifestListFailed).
//   - Terminal says when there is nothing left to wait for: every
//     platform's status entry has finished.
//   - Entries turns the included platforms into Assemble's entries, running
//     CheckRecorded on each.
//   - CheckRecorded catches version skew in what the builders recorded: a
//     platform recorded Complete without an image digest (a builder that does
//     not know multi-platform builds wrote the Build's own status instead), or
//     one whose recorded platform is not the platform it was asked to build
//     (reason PlatformVersionSkew, naming the platform).
//   - CheckChild does the same for what the registry says: the image config
//     of a platform's image must be for that platform.
//   - IndexDescriptors and BuildIndex turn the children into the index:
//     digest, size and media type of each manifest, the full platform (os,
//     architecture, variant, os.version, os.features) from its image config,
//     in a deterministic order (by platform), so the same images always give
//     the same index digest.
//
// # Talking to the registry
//
//	// In a build pod, or in `builder build` on a laptop:
//	res, err := manifestlist.Assemble(ctx, manifestlist.Options{
//		Output:   "registry.example.com/team/app:v1",
//		Entries:  entries, // one per platform that goes in, with its digest
//		Access:   registry.Access{AuthFile: authFile}, // authFile from registry.FindAuthFile
//	})
//	// res.Digest is the index digest, res.Reference "registry.example.com/team/app@sha256:...".
//
//	// Afterwards, and also when the build failed: errors are worth a log
//	// line, never a failed build.
//	tags, _ := platform.Tags(output, platforms)
//	if err := manifestlist.Untag(ctx, access, tags...); err != nil {
//		log.Printf("untagging: %v", err)
//	}
//
// Assemble reads each child's manifest and image config with containers/image,
// checks them (a digest missing from the repository or a config for another
// platform is a PlatformVersionSkew error naming the platform), builds the
// index and pushes it to Output. Untag removes tags with the registry API's
// DELETE /v2/<name>/manifests/<tag>, which removes only the tag: deleting by
// digest (containers/image's DeleteImage, skopeo delete) would delete the
// manifest itself, and with it every tag on it and any index that lists it.
//
// A caller that learns of the platforms' images one at a time (the
// manifest-list pod, as each platform reports Complete) starts a read of each
// with a ReadAhead and gives it to Assemble in Options.ReadAhead: Assemble then
// reads only the entries it has not read, by the same digest for the same
// platform.
//
// Errors that a Build's status should carry are *Error values with a Reason
// (see ReasonOf); anything else is ManifestListFailed.
//
// Credentials, TLS and insecure registries follow package registry's rules
// (registry.Access): a docker config file found by registry.FindAuthFile
// (also in the directories Kubernetes mounts secrets in), read the way
// containers/image reads it (auths, credential helpers, identity tokens).
package manifestlist
