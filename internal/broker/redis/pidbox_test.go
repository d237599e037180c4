package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

// pidboxRequest is a request as a worker decodes it.
type pidboxRequest struct {
	Method      string         `json:"method"`
	Arguments   map[string]any `json:"arguments"`
	Destination []string       `json:"destination"`
	Ticket      string         `json:"ticket"`
	ReplyTo     *struct {
		Exchange   string `json:"exchange"`
		RoutingKey string `json:"routing_key"`
	} `json:"reply_to"`
	Headers map[string]any `json:"-"`
}

// fakeWorker answers pidbox requests the way kombu's Redis transport does
// for a Celery worker: it PSUBSCRIBEs the pidbox channel and sends each
// reply through the reply exchange's bindings (SMEMBERS, then LPUSH to the
// bound queue). A reply sent before the client's SADD is lost, as with a
// real worker.
type fakeWorker struct {
	name  string
	delay time.Duration
	// answer builds the reply value; nil answers {"ok": "pong"}.
	answer func(req pidboxRequest) any
	// stale also pushes a reply carrying somebody else's ticket.
	stale bool
	seen  chan pidboxRequest
}

// startWorkers runs the workers until the test ends, returning once all
// are subscribed.
func startWorkers(t *testing.T, workers ...*fakeWorker) {
	t.Helper()
	rdb := admin(t, brokerDB) // closed after the workers stopped
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, w := range workers {
		w.seen = make(chan pidboxRequest, 100)
		ps := rdb.PSubscribe(ctx, fmt.Sprintf("/%d.celery.pidbox", brokerDB))
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
		wg.Go(func() {
			defer stop()
			for {
				msg, err := ps.ReceiveMessage(ctx)
				if err != nil {
					return
				}
				w.handle(ctx, t, rdb, &wg, []byte(msg.Payload))
			}
		})
	}
}

func (w *fakeWorker) handle(ctx context.Context, t *testing.T, rdb *goredis.Client, wg *sync.WaitGroup, payload []byte) {
	env, err := celery.DecodeEnvelope(payload)
	if err != nil {
		t.Errorf("%s: undecodable request: %v", w.name, err)
		return
	}
	body, err := env.BodyBytes()
	if err != nil {
		t.Errorf("%s: %v", w.name, err)
		return
	}
	var req pidboxRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Errorf("%s: undecodable request body %s: %v", w.name, body, err)
		return
	}
	req.Headers = env.Headers
	select {
	case w.seen <- req:
	default: // nobody looks at that many
	}
	if req.Destination != nil && !slices.Contains(req.Destination, w.name) {
		return
	}
	if req.ReplyTo == nil {
		return // a cast: run it, answer nothing
	}
	var value any = map[string]any{"ok": "pong"}
	if w.answer != nil {
		value = w.answer(req)
	}
	wg.Go(func() {
		select {
		case <-time.After(w.delay):
		case <-ctx.Done():
			return
		}
		if w.stale {
			w.reply(ctx, t, rdb, req.ReplyTo.RoutingKey, "stale-"+req.Ticket, map[string]any{"ok": "old news"})
		}
		w.reply(ctx, t, rdb, req.ReplyTo.RoutingKey, req.Ticket, value)
	})
}

// reply routes one reply through the binding set, as kombu's direct
// exchange emulation does.
func (w *fakeWorker) reply(ctx context.Context, t *testing.T, rdb *goredis.Client, routingKey, ticket string, value any) {
	body, err := json.Marshal(map[string]any{w.name: value})
	if err != nil {
		t.Error(err)
		return
	}
	env := celery.NewEnvelope(body, map[string]any{"ticket": ticket, "clock": 7}, celery.Properties{
		DeliveryMode: 1,
		DeliveryInfo: celery.DeliveryInfo{Exchange: "reply.celery.pidbox", RoutingKey: routingKey},
		DeliveryTag:  uuid.NewString(),
	})
	data, err := json.Marshal(env)
	if err != nil {
		t.Error(err)
		return
	}
	members, err := rdb.SMembers(ctx, "_kombu.binding.reply.celery.pidbox").Result()
	if err != nil {
		return // the test is over
	}
	for _, m := range members {
		parts := strings.Split(m, "\x06\x16")
		if len(parts) == 3 && parts[0] == routingKey {
			_ = rdb.LPush(ctx, parts[2], data).Err()
		}
	}
}

// assertCleanedUp checks that no reply binding or reply list is left.
func assertCleanedUp(t *testing.T, rdb *goredis.Client) {
	t.Helper()
	members, err := rdb.SMembers(t.Context(), "_kombu.binding.reply.celery.pidbox").Result()
	if err != nil || len(members) != 0 {
		t.Errorf("reply bindings left: %q, %v", members, err)
	}
	keys, err := rdb.Keys(t.Context(), "*reply.celery.pidbox*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("reply queues left: %q, %v", keys, err)
	}
}

func hostnames(replies []celery.ControlReply) []string {
	var names []string
	for _, r := range replies {
		names = append(names, r.Hostname)
	}
	slices.Sort(names)
	return names
}

func TestBroadcastCollectsUntilDeadline(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	startWorkers(t, &fakeWorker{name: "w1@h"}, &fakeWorker{name: "w2@h"}, &fakeWorker{name: "w3@h", delay: 300 * time.Millisecond})

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Reply: true})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w1@h", "w2@h", "w3@h"}, hostnames(replies)); diff != "" {
		t.Errorf("replies from (-want +got):\n%s", diff)
	}
	for _, r := range replies {
		if ok, isOK := r.OK(); !isOK || ok != "pong" {
			t.Errorf("%s answered %s", r.Hostname, r.Value)
		}
	}
	// No destination: it waits for stragglers until the deadline.
	if elapsed < 950*time.Millisecond || elapsed > 1300*time.Millisecond {
		t.Errorf("Broadcast took %v, want about 1s", elapsed)
	}
	assertCleanedUp(t, rdb)
}

func TestBroadcastStopsAtLimit(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	w1, w2 := &fakeWorker{name: "w1@h"}, &fakeWorker{name: "w2@h", answer: func(req pidboxRequest) any {
		return map[string]any{"ok": fmt.Sprintf("pool will grow by %v", req.Arguments["n"])}
	}}
	startWorkers(t, w1, w2)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	replies, err := b.Broadcast(ctx, celery.ControlCommand{
		Method: "pool_grow", Arguments: map[string]any{"n": 2}, Destination: []string{"w2@h"}, Reply: true,
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 1 || replies[0].Hostname != "w2@h" {
		t.Fatalf("replies %+v, want one from w2@h", replies)
	}
	if ok, _ := replies[0].OK(); ok != "pool will grow by 2" {
		t.Errorf("reply %s", replies[0].Value)
	}
	if elapsed > 500*time.Millisecond {
		t.Errorf("Broadcast took %v after its only reply", elapsed)
	}
	// Both workers saw the request; it named w2 only.
	req := <-w1.seen
	if diff := cmp.Diff([]string{"w2@h"}, req.Destination); diff != "" || req.Method != "pool_grow" || req.ReplyTo == nil ||
		req.ReplyTo.Exchange != "reply.celery.pidbox" || req.Ticket == "" {
		t.Errorf("request %+v", req)
	}
	assertCleanedUp(t, rdb)
}

// TestBroadcastLongWait has a deadline beyond one BRPOP's longest wait
// (maxBlock), and a reply that comes during the second.
func TestBroadcastLongWait(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	startWorkers(t, &fakeWorker{name: "slow@h", delay: 1300 * time.Millisecond})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: "stats", Destination: []string{"slow@h"}, Reply: true, Limit: 1})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 1 {
		t.Fatalf("replies %+v", replies)
	}
	if elapsed < 1300*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("Broadcast took %v, want just over 1.3s", elapsed)
	}
	assertCleanedUp(t, rdb)
}

// TestBroadcastConcurrent runs the eight inspect methods at once, as the
// inspector does: each call gets exactly its own replies.
func TestBroadcastConcurrent(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	echo := func(req pidboxRequest) any { return map[string]any{"method": req.Method} }
	startWorkers(t, &fakeWorker{name: "w1@h", answer: echo}, &fakeWorker{name: "w2@h", answer: echo, delay: 50 * time.Millisecond})

	methods := []string{"stats", "active_queues", "registered", "scheduled", "active", "reserved", "revoked", "conf"}
	var wg sync.WaitGroup
	for _, m := range methods {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: m, Reply: true})
			if err != nil {
				t.Errorf("%s: %v", m, err)
				return
			}
			if diff := cmp.Diff([]string{"w1@h", "w2@h"}, hostnames(replies)); diff != "" {
				t.Errorf("%s replies from (-want +got):\n%s", m, diff)
			}
			for _, r := range replies {
				var v struct{ Method string }
				if err := json.Unmarshal(r.Value, &v); err != nil || v.Method != m {
					t.Errorf("%s got %s's reply %s", m, r.Hostname, r.Value)
				}
			}
		})
	}
	wg.Wait()
	assertCleanedUp(t, rdb)
}

func TestBroadcastIgnoresOtherTickets(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	startWorkers(t, &fakeWorker{name: "w1@h", stale: true, answer: func(pidboxRequest) any {
		return map[string]any{"error": "KeyError('no_such_cmd')"}
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: "no_such_cmd", Reply: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 1 {
		t.Fatalf("replies %+v, want only the one with our ticket", replies)
	}
	if _, isOK := replies[0].OK(); isOK || replies[0].ErrorText() != "KeyError('no_such_cmd')" {
		t.Errorf("reply %s", replies[0].Value)
	}
	assertCleanedUp(t, rdb)
}

func TestBroadcastWithoutReply(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	w := &fakeWorker{name: "w1@h"}
	startWorkers(t, w)
	start := time.Now()
	replies, err := b.Broadcast(t.Context(), celery.ControlCommand{Method: "shutdown", Destination: []string{"w1@h"}})
	if err != nil || replies != nil {
		t.Fatalf("Broadcast = %v, %v", replies, err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("a cast took %v", d)
	}
	select {
	case req := <-w.seen:
		if req.Method != "shutdown" || req.ReplyTo != nil || req.Ticket != "" {
			t.Errorf("cast request %+v", req)
		}
		if _, ok := req.Headers["clock"]; !ok {
			t.Errorf("no clock header in %v", req.Headers)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the worker never saw the request")
	}
	assertCleanedUp(t, rdb)
}

func TestBroadcastNobodyAnswers(t *testing.T) {
	b := newTestBroker(t)
	rdb := flushBroker(t)
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want time.Duration
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 300*time.Millisecond)
		}, 300 * time.Millisecond},
		{"no deadline waits a second", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(t.Context())
		}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Destination: []string{"ghost@h"}, Reply: true})
			elapsed := time.Since(start)
			if err != nil || len(replies) != 0 {
				t.Errorf("Broadcast = %v, %v; want nothing, no error", replies, err)
			}
			if elapsed < tt.want-50*time.Millisecond || elapsed > tt.want+300*time.Millisecond {
				t.Errorf("Broadcast took %v, want about %v", elapsed, tt.want)
			}
			assertCleanedUp(t, rdb)
		})
	}
}

// TestBroadcastStopsWhenExpectedAnswered: a broadcast to all workers
// returns once every worker in Expect answered, well before its deadline,
// with the replies of the others that came meanwhile; one that expects a
// silent worker waits the deadline.
func TestBroadcastStopsWhenExpectedAnswered(t *testing.T) {
	b := newTestBroker(t)
	flushBroker(t)
	startWorkers(t, &fakeWorker{name: "a@h"}, &fakeWorker{name: "b@h", delay: 100 * time.Millisecond})

	for _, tc := range []struct {
		name   string
		expect []string
		slow   bool
	}{
		{name: "all expected answer", expect: []string{"a@h", "b@h"}},
		{name: "one expected is silent", expect: []string{"a@h", "b@h", "silent@h"}, slow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const deadline = 1500 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			replies, err := b.Broadcast(ctx, celery.ControlCommand{Method: "ping", Reply: true, Expect: tc.expect})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if len(replies) != 2 {
				t.Fatalf("replies %+v, want a@h's and b@h's", replies)
			}
			if slow := elapsed >= deadline-50*time.Millisecond; slow != tc.slow {
				t.Errorf("Broadcast took %v (deadline %v), want slow=%v", elapsed, deadline, tc.slow)
			}
		})
	}
}
