package bed

// S2IScriptsDir is where the test S2I builder image keeps its scripts, as
// its io.openshift.s2i.scripts-url label says.
const S2IScriptsDir = "/usr/libexec/s2i"

// S2IWorkDir is the test S2I builder image's working directory, where
// OpenShift's builder images keep the application (and where a Source
// build's secrets go, below their destinationDir).
const S2IWorkDir = "/opt/app-root/src"

// S2IArtifact is the file the test builder image's assemble "compiles" the
// source into.
const S2IArtifact = "/opt/app/artifact"

// S2IBuilderFiles returns the build context (path -> content) of a
// source-to-image builder image on base, built like any Dockerfile (for
// every platform base has): its assemble "compiles" the source's main.txt
// into S2IArtifact, which records the machine it ran on (uname -m), the
// GREETING of its environment, which assemble made it and how many builds
// made it (builds=N: one more than the previous image's artifact restored
// by an incremental build, which its save-artifacts saves); its run prints
// the artifact; its labels name the scripts and the assemble user, and its
// working directory is S2IWorkDir, as OpenShift's builder images do.
func S2IBuilderFiles(base string) map[string]string {
	return map[string]string{
		"Dockerfile": "FROM " + base + "\n" +
			"COPY s2i/ " + S2IScriptsDir + "/\n" +
			"RUN chmod 755 " + S2IScriptsDir + "/* && mkdir -p /opt/app " + S2IWorkDir + " && chown 1001:0 /opt/app " + S2IWorkDir + "\n" +
			"WORKDIR " + S2IWorkDir + "\n" +
			"LABEL io.openshift.s2i.scripts-url=image://" + S2IScriptsDir + " \\\n" +
			"      io.openshift.s2i.assemble-user=1001 \\\n" +
			"      io.openshift.expose-services=8080:http\n",
		"s2i/assemble": "#!/bin/sh\nset -e\n" +
			"echo \"assembling on $(uname -m) as $(id -u)\"\n" +
			"prev=0; if [ -f /tmp/artifacts/artifact ]; then prev=$(sed -n 's/^builds=//p' /tmp/artifacts/artifact); fi\n" +
			"{ cat /tmp/src/main.txt; echo \"machine=$(uname -m)\"; echo \"greeting=${GREETING:-none}\"; echo \"assembler=image\"; echo \"builds=$((prev + 1))\"; } > " + S2IArtifact + "\n",
		"s2i/run":            "#!/bin/sh\nexec cat " + S2IArtifact + "\n",
		"s2i/save-artifacts": "#!/bin/sh\ncd /opt/app && tar cf - artifact\n",
	}
}
