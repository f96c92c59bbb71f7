package aggregated

import "testing"

func TestRelayedClient(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{"203.0.113.7"}, "203.0.113.7"},
		// A client's own X-Forwarded-For comes first; the apiserver's proxy
		// appends the address it saw.
		{[]string{"10.0.0.1, 198.51.100.2"}, "198.51.100.2"},
		{[]string{"10.0.0.1", "198.51.100.2"}, "198.51.100.2"},
		{[]string{"2001:db8::1"}, "2001:db8::1"},
		{[]string{"10.0.0.1, not-an-address"}, ""},
	} {
		if got := relayedClient(tc.values); got != tc.want {
			t.Errorf("relayedClient(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}
