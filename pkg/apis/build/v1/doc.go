// Package v1 holds archway's build.openshift.io/v1 API: Build and BuildConfig,
// served as CustomResourceDefinitions on any Kubernetes cluster, with the
// multi-architecture extensions of OpenShift's multi-arch builds enhancement.
//
// # Compatibility with OpenShift
//
// Users, oc, the OpenShift console and openshift/client-go already speak this
// API, so the group, the kinds and every JSON field name they know are
// OpenShift's (github.com/openshift/api build/v1). A Build written by an
// OpenShift client decodes into these types and the other way round; a unit
// test decodes each side's JSON with the other side's types to hold that.
//
// The types mirror OpenShift's JSON instead of embedding openshift/api's Go
// types, because those do not generate a clean CRD schema: they carry no
// kubebuilder markers (no enums, defaults, limits or CEL rules can be attached
// to fields we do not own), some optional fields have no omitempty and would
// become required (nodeSelector, status.phase, status.lastVersion), and
// CEL rules need maximum lengths and item counts to fit the apiserver's cost
// budget. So each type here is ours, field for field with OpenShift's JSON
// names and shapes (status.duration stays an integer count of nanoseconds),
// with validation added as markers. Go field types differ from openshift/api
// only where the JSON does not change.
//
// What is left out: the Custom and JenkinsPipeline strategies and image
// sources (spec.source.images). Their fields are here, holding any JSON,
// only so that the CRDs' rules refuse an object that sets one with a
// message naming it: an OpenShift field archway does not implement is
// refused at admission, never dropped and ignored (as the apiserver would
// prune a field the schema lacks, with only a warning, for a client that
// does not ask for strict field validation). The strategy type enum only
// allows Docker and Source. A Source build refuses a source.secrets
// destinationDir its assemble step cannot mount, naming the field.
// ImageChange triggers are served: package pkg/build/trigger/imagechange
// polls the registry of a trigger's DockerImage (an ImageStreamTag is read
// from its stream where the cluster serves image streams) and starts a
// build when its digest changes. (OpenShift's Custom strategy runs
// archway's builder only on OpenShift's own build API, in the
// custom-builder mode of pkg/build/custom.)
//
// # Extensions
//
// spec.platforms and spec.platformsAllowedToFail (on Build and BuildConfig)
// choose the target platforms of a multi-arch build; status.platforms holds
// one entry per target platform, keyed by platform, written with server-side
// apply by one field manager per writer. status.platformsSummary and
// status.durationSummary are display strings the controller writes for the
// Platforms and Duration columns of kubectl get builds (a CRD printer column
// can only show a field as it is stored). Labels, annotations, phases and
// reasons are listed in well_known.go.
//
// # Status writers
//
// Several programs write one Build's status: the controller (phase, reason,
// message, timestamps, the summaries, conditions) and each platform's
// builder (its own status.platforms entry). Each writes with server-side
// apply on the status subresource under a field manager of its own, sending
// only the fields it owns. The controller builds its applies with the
// generated apply configurations in package applyconfiguration/build/v1,
// reading what it owned before with ExtractBuildStatus:
//
//	entry := buildv1ac.BuildStatusPlatform().WithPlatform("linux/arm64").WithPhase(buildv1.BuildPhaseRunning)
//	obj := buildv1ac.Build(name, namespace).WithStatus(buildv1ac.BuildStatus().WithPlatforms(entry))
//	err := c.Status().Apply(ctx, obj, client.FieldOwner("archway-build-controller"), client.ForceOwnership)
//
// The builder names its fields one by one in package pkg/build/builder/report
// instead: the apply configurations would add 22 MB to a binary every RUN
// step re-executes.
//
// status.platforms is a map keyed by platform, so the apiserver merges the
// entries instead of replacing the list, and no writer overwrites another's
// data. Many writers of one object make the apiserver retry its optimistic
// writes: an apply is idempotent, so a writer retries server timeouts,
// conflicts and throttling. Typed Update calls (openshift/client-go's
// UpdateStatus, say) replace the whole status and drop the fields
// openshift/api does not know, so archway's writers never use them.
//
// # Validation
//
// All admission rules are CEL rules on the types, so they hold without a
// webhook: the platform string shape, duplicate platforms after
// normalization, platformsAllowedToFail as a subset of platforms, at most 16
// platforms, the strategy and trigger shapes, output references, and the
// immutability of a Build's spec (as in OpenShift, spec.revision may be set
// once and spec.output.pushSecret may change). BuildConfig specs stay mutable.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=build.openshift.io
package v1
