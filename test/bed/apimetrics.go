package bed

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Counts are readings of counters by name. Two readings subtracted (Sub)
// tell what a stretch of a test or benchmark cost.
type Counts map[string]float64

// APIRequests reads the apiserver's apiserver_request_total counters, by
// "VERB resource[/subresource]".
func (b *Bed) APIRequests(ctx context.Context) (Counts, error) {
	families, err := b.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := Counts{}
	family := families["apiserver_request_total"]
	if family == nil {
		return out, nil
	}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// AdmissionFailOpen reads how many times the apiserver let a request
// through because it could not call the admission webhook named webhook
// and its failurePolicy is Ignore (apiserver_admission_webhook_fail_open_count).
func (b *Bed) AdmissionFailOpen(ctx context.Context, webhook string) (float64, error) {
	families, err := b.apiMetrics(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for _, m := range families["apiserver_admission_webhook_fail_open_count"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "name" && l.GetValue() == webhook {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n, nil
}

// apiMetrics reads and parses the apiserver's /metrics.
func (b *Bed) apiMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	raw, err := b.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the apiserver's /metrics: %w", err)
	}
	return families, nil
}

// Sub is r minus an earlier reading, without the entries that did not
// change.
func (r Counts) Sub(earlier Counts) Counts {
	out := Counts{}
	for k, v := range r {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Writes is the number of requests that changed something (for readings of
// APIRequests).
func (r Counts) Writes() float64 {
	var n float64
	for k, v := range r {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			n += v
		}
	}
	return n
}

// String lists the counts, largest first.
func (r Counts) String() string {
	keys := slices.SortedFunc(maps.Keys(r), func(a, b string) int {
		if r[a] != r[b] {
			if r[a] > r[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	for _, k := range keys {
		if r[k] == float64(int64(r[k])) {
			fmt.Fprintf(&sb, "%8.0f %s\n", r[k], k)
		} else {
			fmt.Fprintf(&sb, "%8.2f %s\n", r[k], k)
		}
	}
	return sb.String()
}

// SelfCPU is the key of this test process in ProcessCPU's readings.
const SelfCPU = "(this test process)"

// ProcessCPU is the CPU seconds (user+system) each child process of this
// test binary has used so far, by command name: the bed's apiserver, etcd,
// scheduler, kwok, registries, and any program the test started; and this
// process's own, under SelfCPU. Two readings subtracted (Sub) tell who paid
// for a stretch of a benchmark.
func ProcessCPU() (Counts, error) {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := Counts{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // gone
		}
		name := st.comm
		if pid == self {
			name = SelfCPU
		} else if st.ppid != self {
			continue
		}
		out[name] += st.cpu
	}
	return out, nil
}

// CPUSeconds is the CPU seconds (user+system) process pid has used so far.
func CPUSeconds(pid int) (float64, error) {
	st, err := readStat(pid)
	return st.cpu, err
}

// procStat is what the bed reads of /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	cpu  float64 // user+system seconds
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command (which may hold spaces and parentheses) is between the
	// first "(" and the last ")"; the numbered fields follow.
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open || closing+2 > len(s) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	fields := strings.Fields(s[closing+2:])
	if len(fields) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	ppid, _ := strconv.Atoi(fields[1])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	// Clock ticks of 1/100 s, as on every Linux we run on.
	return procStat{comm: s[open+1 : closing], ppid: ppid, cpu: (utime + stime) / 100}, nil
}
