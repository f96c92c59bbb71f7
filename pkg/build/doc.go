// Package build holds no code: its packages are arranged by the program
// they run in, so a reader can tell from the tree what runs where.
//
// In build-controller (cmd/build-controller):
//
//   - controller: the Build controller (a pod per platform, the
//     manifest-list pod, the Build's status).
//   - buildconfig: the BuildConfig controller (ConfigChange trigger, run
//     policy, history pruning).
//   - trigger/scm: the SCM webhook triggers (GitHub, GitLab, Bitbucket,
//     generic).
//   - trigger/binary: the binary-build endpoint; trigger/binary/artifact is
//     the upload's format, which the build pods read back.
//
// In the build pods (cmd/builder):
//
//   - builder/docker: `builder docker-build`, one platform's build.
//   - builder/image: the build itself with the buildah library.
//   - builder/s2i: a Source (source-to-image) build made a Dockerfile
//     build, which builder/image builds like a Docker strategy's.
//   - builder/source: fetching the source (Git, binary input, secrets).
//   - builder/manifestlist: `builder manifest-list`, the index of the
//     platforms' images.
//   - builder/report: what a pod writes into its Build's status.
//
// In the kubectl plugin (cmd/kubectl-archway):
//
//   - plugin: kubectl archway's commands.
//
// Shared by more than one program, and dragging in neither side's
// dependencies:
//
//   - instantiate: starting a Build from a BuildConfig (build-controller's
//     triggers and the plugin's start-build).
//   - dockerfile: the Dockerfile model (stages, ARG scopes, bases, mounts,
//     platforms, keyability) that the builder's keys and base checks and
//     build-controller's preflight read; it links the Dockerfile parser
//     alone.
//   - cacheprune: pruning layer cache repositories (the plugin's prune
//     cache and the builder's prune-cache command); it needs only the
//     registry client.
//
// The names the programs share (labels, annotations, pod names, the pod
// selector) live beside the API types, in pkg/apis/build/v1.
package build
