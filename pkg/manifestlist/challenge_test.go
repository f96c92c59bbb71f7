package manifestlist

import (
	"reflect"
	"testing"
)

func TestParseChallenges(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   []challenge
	}{
		{name: "basic", values: []string{`Basic realm="archway-bed"`},
			want: []challenge{{scheme: "basic", params: map[string]string{"realm": "archway-bed"}}}},
		{name: "bearer with a scope holding commas",
			values: []string{`Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:team/app:pull,push,delete"`},
			want: []challenge{{scheme: "bearer", params: map[string]string{
				"realm": "https://auth.example.com/token", "service": "registry.example.com", "scope": "repository:team/app:pull,push,delete"}}}},
		{name: "bearer with an error, spaces and case",
			values: []string{`BEARER  Realm = "https://a/token" , error="insufficient_scope", scope=x`},
			want:   []challenge{{scheme: "bearer", params: map[string]string{"realm": "https://a/token", "error": "insufficient_scope", "scope": "x"}}}},
		{name: "two challenges in one value",
			values: []string{`Basic realm="r1", Bearer realm="https://t/token",service=s`},
			want: []challenge{
				{scheme: "basic", params: map[string]string{"realm": "r1"}},
				{scheme: "bearer", params: map[string]string{"realm": "https://t/token", "service": "s"}},
			}},
		{name: "two values", values: []string{`Basic realm="a"`, `Bearer realm="b"`},
			want: []challenge{
				{scheme: "basic", params: map[string]string{"realm": "a"}},
				{scheme: "bearer", params: map[string]string{"realm": "b"}},
			}},
		{name: "escaped quote", values: []string{`Basic realm="say \"hi\""`},
			want: []challenge{{scheme: "basic", params: map[string]string{"realm": `say "hi"`}}}},
		{name: "unterminated quote keeps what came before", values: []string{`Bearer service=s, realm="https://a`},
			want: []challenge{{scheme: "bearer", params: map[string]string{"service": "s"}}}},
		{name: "scheme without parameters", values: []string{`Negotiate`},
			want: []challenge{{scheme: "negotiate", params: map[string]string{}}}},
		{name: "empty", values: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseChallenges(tt.values); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseChallenges(%q) = %+v\nwant %+v", tt.values, got, tt.want)
			}
		})
	}
}
