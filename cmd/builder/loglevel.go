package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/sirupsen/logrus"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// BuildLogLevelEnv is the strategy env variable `oc start-build
// --build-loglevel` (and `kubectl archway start-build --build-loglevel`)
// sets: OpenShift's builder log level, 0 to 5 and more.
const BuildLogLevelEnv = "BUILD_LOGLEVEL"

// raiseLogLevel raises the level of buildah's and containers/image's log
// lines as the Build's BUILD_LOGLEVEL asks, as OpenShift's builder does:
// 2 to 4 adds their informational lines, 5 and more their debug lines; 0
// and 1 leave --log-level's. A value that is not a number is reported on
// out and changes nothing.
func raiseLogLevel(b *buildv1.Build, out io.Writer) {
	for _, e := range b.Spec.Strategy.StrategyEnv() {
		if e.Name != BuildLogLevelEnv || e.ValueFrom != nil {
			continue
		}
		n, err := strconv.Atoi(e.Value)
		if err != nil || n < 0 {
			_, _ = fmt.Fprintf(out, "Warning: %s=%q is not a log level (0 to 5): the builder's log level is left as it is\n", BuildLogLevelEnv, e.Value)
			return
		}
		level := logrus.GetLevel()
		switch {
		case n >= 5:
			level = max(level, logrus.DebugLevel)
		case n >= 2:
			level = max(level, logrus.InfoLevel)
		}
		logrus.SetLevel(level)
	}
}
