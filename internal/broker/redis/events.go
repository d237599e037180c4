package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"
	"unsafe"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

const (
	// enableEventsEvery is how often workers are told to send task events
	// (Flower's events_enable_interval): the setting dies with a worker.
	enableEventsEvery = 5 * time.Second
	// eventsIdle is how long a quiet subscription waits before pinging the
	// server to find out whether the connection is still there.
	eventsIdle = 5 * time.Second
	// reconnect backoff bounds. The longest wait is what a server that
	// came back waits for stamen at most: /readyz turns 200 again within
	// it (plus the subscription's round trips).
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// eventsPatterns match every celeryev channel of the broker's db.
func (b *Broker) eventsPatterns() []string {
	return b.fanouts("celeryev/*")
}

// ConsumeEvents follows the workers' event stream and calls fn with each
// message's events (task events arrive batched), LocalReceived set. fn runs
// on this goroutine; a slow fn delays the stream, it does not drop it. The
// events and their Raw and Signum bytes are reused once fn returns (see
// celery.EventDecoder): fn copies what it keeps but strings.
//
// On every (re)subscription it asks all workers for a heartbeat so that
// they show up at once, and, unless Config.NoEnableEvents, for task events
// then and every 5 s (enable_events), so that workers started without -E
// send task events too. A lost connection is re-established with backoff;
// undecodable messages are dropped. It returns ctx.Err() when ctx ends, or
// an error once the Broker is closed.
func (b *Broker) ConsumeEvents(ctx context.Context, fn func([]celery.Event)) error {
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if b.enableEvents {
		wg.Go(func() { celery.EnableEventsLoop(ctx, b, b.enableEvery, b.log) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	backoff := minBackoff
	failing := false
	for {
		subscribed, err := b.consumeOnce(ctx, fn)
		b.following.Store(false)
		if b.closed.Load() {
			return fmt.Errorf("event stream: broker closed: %w", celery.ErrUnavailable)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if subscribed {
			backoff = minBackoff
		}
		if !failing || subscribed {
			b.log.Warn("event stream interrupted; reconnecting", slog.String("broker", b.redacted), slog.Any("err", err))
		} else {
			b.log.Debug("event stream still down", slog.Any("err", err), slog.Duration("retry_in", backoff))
		}
		failing = true
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// consumeOnce runs one subscription until it fails or ctx ends, reporting
// whether the subscription had been established.
func (b *Broker) consumeOnce(ctx context.Context, fn func([]celery.Event)) (bool, error) {
	ps := b.client.PSubscribe(ctx)
	defer ps.Close()
	// A blocked read only notices ctx through a closed connection.
	release := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer release()

	octx, cancel := b.opContext(ctx)
	patterns := b.eventsPatterns()
	err := ps.PSubscribe(octx, patterns...)
	// One confirmation per pattern proves the subscription active.
	for range patterns {
		if err != nil {
			break
		}
		_, err = ps.ReceiveTimeout(octx, b.opTimeout)
	}
	cancel()
	if err != nil {
		return false, wrap(ctx, "subscribe to events", err)
	}
	b.log.Info("following worker events", slog.String("broker", b.redacted), slog.Any("patterns", patterns))
	b.subscribed()
	celery.WakeWorkers(ctx, b, b.enableEvents, b.log)

	// Reading, decoding and applying run on their own goroutines, so that
	// a message is read while those before it are decoded and applied:
	// one goroutine reads (go-redis ~2.5 us a message), decoders unwrap
	// and decode (~3 us), and fn applies (~3.5 us). Decoding goes to as
	// many goroutines as the cores allow (decoders): with one, its stage
	// and fn's were two thirds of a message's wall time each on 16 cores,
	// and ingestion ran at 36% of what Redis delivered (bench/RESULTS.md).
	// The reader deals the messages to the decoders in turn and fn takes
	// them back in the same turn, so the events keep their order. fn hands
	// each decoder back for a later message to reuse its memory; at most
	// decoders*(queue+1)+eventsBatch exist, so free never blocks.
	//
	// The messages already waiting when fn is called go to it together, up
	// to eventsBatch of them: fn takes the state's write lock once per call,
	// and one lock per message (tens of thousands a second) kept readers
	// queueing behind the writer, which made the reads' tail latency. A
	// message alone goes at once: batching never waits for more.
	n := b.decoders
	queue := max(1, eventsQueue/n)
	raw := make([]chan rawMessage, n)
	decoded := make([]chan eventMessage, n)
	free := make(chan *celery.EventDecoder, n*(queue+1)+eventsBatch)
	var recvErr error
	for k := range n {
		raw[k] = make(chan rawMessage, queue)
		decoded[k] = make(chan eventMessage, queue)
		go func() {
			defer close(decoded[k])
			decodeEvents(raw[k], free, decoded[k])
		}()
	}
	go func() {
		defer func() {
			for _, c := range raw {
				close(c)
			}
		}()
		recvErr = b.receiveEvents(ctx, ps, raw)
	}()
	var batch []celery.Event
	held := make([]*celery.EventDecoder, 0, eventsBatch)
	add := func(m eventMessage) {
		held = append(held, m.dec)
		if m.err != nil {
			b.log.Debug("dropping undecodable event message", slog.String("channel", m.channel), slog.Any("err", m.err))
			return
		}
		for i := range m.events {
			m.events[i].LocalReceived = m.received
		}
		batch = append(batch, m.events...)
	}
	turn := 0
	for {
		m, ok := <-decoded[turn]
		if !ok {
			break
		}
		turn = (turn + 1) % n
		add(m)
	more:
		for len(held) < eventsBatch {
			select {
			case m, ok := <-decoded[turn]:
				if !ok {
					break more
				}
				turn = (turn + 1) % n
				add(m)
			default:
				break more
			}
		}
		if len(batch) > 0 {
			fn(batch)
		}
		// The events point into their decoders until fn has returned.
		clear(batch)
		batch = batch[:0]
		for _, dec := range held {
			dec.Trim()
			free <- dec
		}
		held = held[:0]
	}
	// The reader has ended (a decoder's channel closes only after it), so
	// recvErr is set.
	return true, recvErr
}

// decoders is how many goroutines decode events: a core of every four, one
// to four. The reader and fn's goroutine take a core each, and the readers
// of the state the rest.
func decoders() int { return min(4, max(1, runtime.GOMAXPROCS(0)/4)) }

// decodeEvents unwraps and decodes the messages of in into out, each in a
// decoder from free or a new one, until in is closed. A message that does
// not decode goes on with its error, to keep its turn.
func decodeEvents(in <-chan rawMessage, free <-chan *celery.EventDecoder, out chan<- eventMessage) {
	for m := range in {
		var dec *celery.EventDecoder
		select {
		case dec = <-free:
		default:
			dec = new(celery.EventDecoder)
		}
		em := eventMessage{dec: dec, channel: m.channel, received: m.received}
		// Unwrap neither keeps nor changes the payload, so it can read the
		// string's bytes instead of a copy.
		em.err = dec.Unwrap(unsafe.Slice(unsafe.StringData(m.payload), len(m.payload)))
		if em.err == nil {
			em.events, em.err = dec.Events()
		}
		out <- em
	}
}

// eventsQueue is how many messages wait to be decoded, and how many
// decoded ones wait for fn: enough to ride out a pause in fn without making
// Redis buffer them.
const eventsQueue = 512

// eventsBatch bounds how many waiting messages one call of fn gets. fn
// waits for the state's readers once per call, so a writer that falls
// behind catches up in larger batches, each paying that wait once. With
// the state's other changes of the same step (a longer write hold, lists
// taking turns), 16 closed-loop readers on 16 cores went from taking 58%
// of ingestion away to 9-13% (bench/RESULTS.md, readers and the writer).
// 512 decoders of a few kilobytes each are what it costs.
const eventsBatch = 512

// rawMessage is one message as read.
type rawMessage struct {
	payload  string
	channel  string
	received float64 // when it arrived, epoch seconds
}

// eventMessage is one message, decoded in its decoder: its events, or the
// error that dropped it.
type eventMessage struct {
	dec      *celery.EventDecoder
	events   []celery.Event
	err      error
	channel  string
	received float64
}

// receiveEvents reads the subscription's messages and deals them to out in
// turn, until it fails or ctx ends.
func (b *Broker) receiveEvents(ctx context.Context, ps *goredis.PubSub, out []chan rawMessage) error {
	pinged := false
	turn := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, b.eventsIdle)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			var nerr net.Error
			if !errors.As(err, &nerr) || !nerr.Timeout() {
				return wrap(ctx, "receive events", err)
			}
			if pinged {
				return fmt.Errorf("redis receive events: %w: no answer to ping", celery.ErrUnavailable)
			}
			octx, cancel := b.opContext(ctx)
			err = ps.Ping(octx)
			cancel()
			if err != nil {
				return wrap(ctx, "ping event subscription", err)
			}
			pinged = true
			continue
		}
		pinged = false
		m, ok := msg.(*goredis.Message)
		if !ok {
			continue // pong or subscription confirmation
		}
		select {
		case out[turn] <- rawMessage{payload: m.Payload, channel: m.Channel, received: float64(time.Now().UnixNano()) / 1e9}:
			turn = (turn + 1) % len(out)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
