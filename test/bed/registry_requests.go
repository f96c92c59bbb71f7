package bed

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
)

// RegistryRequest is one request of a registry's access log.
type RegistryRequest struct {
	Method    string
	Path      string
	Status    int
	UserAgent string
}

// accessLogLine is a line of Distribution's access log (Apache combined
// format): host - user [time] "METHOD path proto" status size "referer" "agent".
var accessLogLine = regexp.MustCompile(`^\S+ \S+ \S+ \[[^\]]*\] "(\S+) (\S+) [^"]*" (\d{3}) \S+ "[^"]*" "([^"]*)"`)

// Requests returns the requests r has answered so far, in order, from its
// access log.
func (r *Registry) Requests() ([]RegistryRequest, error) {
	f, err := os.Open(r.proc.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []RegistryRequest
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		m := accessLogLine.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(m[3])
		out = append(out, RegistryRequest{Method: m[1], Path: m[2], Status: status, UserAgent: m[4]})
	}
	return out, s.Err()
}
