package app

import (
	"context"
	"strings"
	"testing"
)

// TestInvalidBrokerURLHidesPassword: a password holding an unescaped '/',
// '?' or '#' ends the URL's host early, and url.Parse's reason then quotes
// the password's start as the port; the error must not.
func TestInvalidBrokerURLHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://:s3cret/x@127.0.0.1:1/0",
		"amqp://u:s3cret#x@127.0.0.1:1/",
		"sentinel://:s3cret?x@127.0.0.1:1/0",
	} {
		a, err := New(context.Background(), Config{BrokerURL: raw})
		if err == nil {
			a.Close()
			t.Fatalf("New(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): error reveals the password: %v", raw, err)
		}
	}
}
