package crossorigin

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseOrigins(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: " , ", want: nil},
		{in: "https://ops.example", want: []string{"https://ops.example"}},
		// As browsers write them: lower case, default port left out.
		{in: "HTTPS://Ops.Example:443/", want: []string{"https://ops.example"}},
		{in: "http://ops.example:80, http://ops.example:8080", want: []string{"http://ops.example", "http://ops.example:8080"}},
		{in: "http://[::1]:3000,http://[::1]", want: []string{"http://[::1]:3000", "http://[::1]"}},
		{in: "https://a.example,https://a.example", want: []string{"https://a.example"}},
		{in: "ops.example", wantErr: "want http://host[:port]"},
		{in: "ftp://ops.example", wantErr: "want http://host[:port]"},
		{in: "https://", wantErr: "no host"},
		{in: "https://*.example", wantErr: "wildcards"},
		{in: "*", wantErr: "wildcards"},
		{in: "null", wantErr: "want http://host[:port]"},
		{in: "https://ops.example/dash", wantErr: "no path"},
		{in: "https://ops.example?x=1", wantErr: "no path"},
		{in: "https://u:p@ops.example", wantErr: "user information"},
		{in: "https://ops.example:0", wantErr: "port"},
		{in: "https://ops.example:99999", wantErr: "port"},
		{in: "https://bücher.example", wantErr: "punycode"},
	} {
		got, err := ParseOrigins(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "invalid origin") {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
		// What it returns is what New takes.
		if _, err := New(Config{AllowedOrigins: got}); err != nil {
			t.Errorf("%q: New refuses %q: %v", tc.in, got, err)
		}
	}
	if _, err := New(Config{AllowedOrigins: []string{"https://Ops.example"}}); err == nil {
		t.Error("New takes an origin no browser sends")
	}
}

func TestParseHosts(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "Stamen.Example.COM., flower_1.internal", want: []string{"stamen.example.com", "flower_1.internal"}},
		{in: "10.0.0.5,[fd00::1]", want: []string{"10.0.0.5", "fd00::1"}},
		{in: "stamen.example.com:5555", wantErr: "without a port"},
		{in: "https://stamen.example.com", wantErr: "not a URL"},
		{in: "*.example.com", wantErr: "wildcards"},
		{in: "a..b", wantErr: "labels"},
		{in: "bad host", wantErr: "letters, digits"},
		{in: strings.Repeat("a", 64) + ".example", wantErr: "labels"},
	} {
		got, err := ParseHosts(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
