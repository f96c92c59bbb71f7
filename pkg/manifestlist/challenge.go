package manifestlist

import "strings"

// challenge is one authentication challenge of a WWW-Authenticate header
// (RFC 9110 section 11.6.1): a scheme and its parameters, e.g.
// Bearer realm="https://auth.example.com/token",service="registry",scope="repository:team/app:delete".
type challenge struct {
	// scheme is lowercase: "basic", "bearer".
	scheme string
	// params are keyed by lowercase name.
	params map[string]string
}

// parseChallenges reads every challenge of WWW-Authenticate header values; a
// value may hold several. Parameters with quoted values may contain commas
// and escaped quotes. It stops at the first part of a value it cannot read
// and keeps what it read before.
func parseChallenges(values []string) []challenge {
	var out []challenge
	for _, s := range values {
		current := -1
		for {
			s = strings.TrimLeft(s, " \t,")
			if s == "" {
				break
			}
			name, rest := readToken(s)
			if name == "" {
				break
			}
			after := strings.TrimLeft(rest, " \t")
			if strings.HasPrefix(after, "=") && current >= 0 {
				value, rest, ok := readValue(strings.TrimLeft(after[1:], " \t"))
				if !ok {
					break
				}
				out[current].params[strings.ToLower(name)] = value
				s = rest
				continue
			}
			out = append(out, challenge{scheme: strings.ToLower(name), params: map[string]string{}})
			current = len(out) - 1
			s = rest
		}
	}
	return out
}

// readToken reads an RFC 9110 token from the start of s.
func readToken(s string) (token, rest string) {
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// readValue reads a parameter value, a token or a quoted string, from the
// start of s.
func readValue(s string) (value, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		value, rest = readToken(s)
		return value, rest, value != ""
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}
