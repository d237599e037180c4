package celery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRedisKeysOptions checks the layout under kombu's transport options:
// global_keyprefix goes in front of every key and channel (not binding
// members, which are values), sep between a queue and its step and between
// a binding's fields, priority_steps picks the sub-queues.
func TestRedisKeysOptions(t *testing.T) {
	k := RedisKeys{Prefix: "pfx:", Sep: ":", Steps: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, DB: 3}
	for _, tt := range []struct{ got, want string }{
		{k.Queue("celery", 0), "pfx:celery"},
		{k.Queue("celery", 4), "pfx:celery:4"},
		{k.Queue("celery", 200), "pfx:celery:9"},
		{k.Binding("reply.celery.pidbox"), "pfx:_kombu.binding.reply.celery.pidbox"},
		{k.BindingMember("rk", "q"), "rk::q"},
		{k.Fanout("celery.pidbox"), "pfx:/3.celery.pidbox"},
		{k.Fanout("celeryev/*"), "pfx:/3.celeryev/*"},
		{RedisKeys{}.Fanout("celeryev/*"), "/0.celeryev/*"},
		{k.SentinelFanout52("celery.pidbox"), "pfx:/{db}.celery.pidbox"},
		{RedisKeys{}.BindingMember("rk", "q"), "rk\x06\x16\x06\x16q"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if diff := cmp.Diff([]string{"pfx:q", "pfx:q:5", "pfx:q:9"}, RedisKeys{Prefix: "pfx:", Sep: ":", Steps: []int{0, 5, 9}}.Queues("q")); diff != "" {
		t.Errorf("Queues (-want +got):\n%s", diff)
	}
	if got, want := k.BoundQueues([]string{"rk::b", "rk::a", "x::c", "rk\x06\x16\x06\x16d"}, "rk"), []string{"a", "b"}; !cmp.Equal(got, want) {
		t.Errorf("BoundQueues = %v, want %v", got, want)
	}
	// kombu's bisect wraps to the last step when every step is above the
	// priority.
	if got, want := (RedisKeys{Steps: []int{2, 5}}).Queue("q", 1), "q\x06\x165"; got != want {
		t.Errorf("below the first step: %q, want %q", got, want)
	}
}

func TestResultKeyPrefixFor(t *testing.T) {
	for _, tt := range []struct{ global, want string }{
		{"", "celery-task-meta-"},
		{"app", "app_celery-task-meta-"},
		{"app:", "app:celery-task-meta-"},
		{"app.", "app.celery-task-meta-"},
		{"app-", "app-celery-task-meta-"},
		{"app_", "app_celery-task-meta-"},
	} {
		if got := ResultKeyPrefixFor(tt.global); got != tt.want {
			t.Errorf("ResultKeyPrefixFor(%q) = %q, want %q", tt.global, got, tt.want)
		}
	}
}
