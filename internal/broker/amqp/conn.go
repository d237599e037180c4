package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stamen-dev/stamen/internal/celery"
)

// heartbeat is the AMQP heartbeat we ask for (a heartbeat in the URL
// wins). It is what notices a broker that vanished without closing the
// socket.
const heartbeat = 10 * time.Second

// session is one connection and the Broker's long-lived channels on it.
// When any of them dies the whole session is given up and rebuilt: a
// channel error on our own channels means a declaration went missing, and
// a fresh connection redeclares everything.
type session struct {
	conn *amqp091.Connection
	// pub is the confirm-mode channel shared by every publish (amqp091
	// serializes publishes on a channel and matches confirms by tag). A
	// publish RabbitMQ refuses (ACCESS_REFUSED) closes it: it is then
	// replaced, not the whole session. pubChanged is closed and replaced
	// when pub is.
	pubMu      sync.Mutex
	pub        *publisher
	pubChanged chan struct{}
	started    time.Time

	done     chan struct{}
	doneOnce sync.Once
	errMu    sync.Mutex
	err      error

	// blocked is set while RabbitMQ blocks publishers (resource alarm):
	// publishing then fails at once instead of hanging until the timeout.
	blocked atomic.Bool

	// unanswered counts the calls on this session that bounded stopped
	// waiting for and that have not returned yet: each holds a goroutine
	// until the broker answers or the heartbeat gives the connection up
	// (up to three heartbeats, 30 s). bounded refuses new calls at once
	// while maxUnanswered are stuck, so a stalled broker costs a bounded
	// number of goroutines however many requests arrive meanwhile.
	unanswered atomic.Int32

	// declared remembers queues known to exist, like kombu's maybe_declare
	// cache, so that not every publish costs a passive declare.
	declMu   sync.Mutex
	declared map[string]time.Time
}

// publisher is one publish channel, in confirm mode, with the returns of
// its mandatory publishes.
type publisher struct {
	ch *amqp091.Channel
	// returns matches RabbitMQ's returns of mandatory publishes on ch to
	// the publishes waiting for their confirm.
	returns *returns
	// done is closed once ch is; err, set before, is why (nil when the
	// connection closed without a reason).
	done chan struct{}
	err  *amqp091.Error
}

// publisher returns the session's publish channel, waiting until ctx ends
// for the replacement of one that closed.
func (s *session) publisher(ctx context.Context) (*publisher, error) {
	for {
		s.pubMu.Lock()
		p, changed := s.pub, s.pubChanged
		s.pubMu.Unlock()
		select {
		case <-p.done:
		default:
			return p, nil
		}
		select {
		case <-changed:
		case <-s.done:
			return nil, fmt.Errorf("connection lost: %w", celery.ErrUnavailable)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *session) setPublisher(p *publisher) {
	s.pubMu.Lock()
	s.pub = p
	if s.pubChanged != nil {
		close(s.pubChanged)
	}
	s.pubChanged = make(chan struct{})
	s.pubMu.Unlock()
}

// forget drops queue from the declared cache: it was found missing.
func (s *session) forget(queue string) {
	s.declMu.Lock()
	delete(s.declared, queue)
	s.declMu.Unlock()
}

// alive reports whether the session is still usable.
func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// fail marks the session dead, keeping the first reason.
func (s *session) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.doneOnce.Do(func() { close(s.done) })
}

// cause is why the session died.
func (s *session) cause() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		return errors.New("closed")
	}
	return s.err
}

// close ends the session and its connection, waiting at most timeout for
// the broker to acknowledge.
func (s *session) close(timeout time.Duration) error {
	s.fail(errors.New("closed by us"))
	if s.conn.IsClosed() {
		return nil
	}
	err := s.conn.CloseDeadline(time.Now().Add(timeout))
	if errors.Is(err, amqp091.ErrClosed) {
		return nil
	}
	return err
}

// connect sets a session up on the first broker URL that takes it, trying
// them in turn from the last that worked, as kombu's round-robin failover
// does; each attempt is bounded by the op timeout.
func (b *Broker) connect(ctx context.Context) (*session, error) {
	n := int64(len(b.urls))
	first := b.cur.Load()
	var err error
	for i := range n {
		idx := (first + i) % n
		var s *session
		s, err = b.connectTo(ctx, b.urls[idx])
		if err == nil {
			if idx != first {
				b.log.Info("failed over to another broker URL", slog.String("url", b.shown[idx]))
				b.cur.Store(idx)
			}
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if n > 1 {
			b.log.Debug("broker URL failed", slog.String("url", b.shown[idx]), slog.Any("err", err))
		}
	}
	return nil, err
}

// connectTo dials url and sets a session up, bounded by ctx and the op
// timeout. The dial and AMQP's synchronous methods cannot be interrupted,
// so they run on their own goroutine; if we stop waiting, whatever it
// produces later is closed.
func (b *Broker) connectTo(ctx context.Context, url string) (*session, error) {
	octx, cancel := b.opContext(ctx)
	defer cancel()
	type result struct {
		s   *session
		err error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	if !b.spawn(func() {
		s, err := b.dialSession(url)
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if s != nil {
				_ = s.close(b.opTimeout)
			}
			return
		}
		res <- result{s, err}
	}) {
		return nil, errClosed("connect")
	}
	select {
	case r := <-res:
		return r.s, r.err
	case <-octx.Done():
		mu.Lock()
		abandoned = true
		mu.Unlock()
		select {
		case r := <-res:
			if r.s != nil {
				_ = r.s.close(b.opTimeout)
			}
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("amqp connect: no answer within %s: %w", b.opTimeout, celery.ErrUnavailable)
	}
}

// dialSession opens the connection and the Broker's channels: the confirm
// mode publish channel, the pidbox reply consumer and, with rpc://, the
// results consumer.
func (b *Broker) dialSession(url string) (s *session, err error) {
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName("stamen")
	conn, err := amqp091.DialConfig(url, amqp091.Config{
		Heartbeat:  heartbeat,
		Properties: props,
		// Bounds the TCP dial and the TLS and AMQP handshakes.
		Dial: amqp091.DefaultDial(b.opTimeout),
		// A copy per dial: amqp091 sets ServerName to the URL's host in
		// it, and a failover list has several hosts.
		TLSClientConfig: b.tls.Clone(),
	})
	if err != nil {
		return nil, classify("connect", err)
	}
	s = &session{
		conn:     conn,
		started:  time.Now(),
		done:     make(chan struct{}),
		declared: map[string]time.Time{},
	}
	defer func() {
		if err != nil {
			_ = s.close(b.opTimeout)
		}
	}()
	// Watch before anything can fail, so that no notification is missed.
	b.watchConn(s)

	setup, err := conn.Channel()
	if err != nil {
		return nil, classify("open channel", err)
	}
	// Celery's pidbox exchanges: requests fan out to every worker's
	// queue, replies are routed to our queue by our oid.
	if err := setup.ExchangeDeclare(celery.ControlExchange, amqp091.ExchangeFanout, false, false, false, false, nil); err != nil {
		return nil, classify("declare exchange "+celery.ControlExchange, err)
	}
	if err := setup.ExchangeDeclare(celery.ReplyExchange, amqp091.ExchangeDirect, false, false, false, false, nil); err != nil {
		return nil, classify("declare exchange "+celery.ReplyExchange, err)
	}
	_ = setup.Close()

	pub, err := b.openPublisher(s)
	if err != nil {
		return nil, err
	}
	s.setPublisher(pub)

	replies, err := b.consumeQueue(s, "pidbox replies", b.replyQueue, amqp091.Table{
		// kombu's control_queue_expires and control_queue_ttl.
		"x-expires":     int32(10000),
		"x-message-ttl": int32(300000),
	}, func(ch *amqp091.Channel) error {
		return ch.QueueBind(b.replyQueue, b.oid, celery.ReplyExchange, false, nil)
	})
	if err != nil {
		return nil, err
	}
	b.wg.Go(func() { b.dispatchReplies(s, replies) })

	if b.rpcQueue != "" {
		results, err := b.consumeQueue(s, "rpc results", b.rpcQueue, amqp091.Table{
			// Celery's rpc:// queue expires after result_expires (1 day).
			"x-expires": int32(86400000),
		}, nil)
		if err != nil {
			return nil, err
		}
		b.wg.Go(func() { b.dispatchResults(s, results) })
	}
	return s, nil
}

// consumeQueue declares a non-durable auto-delete queue on a new channel,
// runs bind, and consumes it without acks. The channel lives as long as
// the session.
func (b *Broker) consumeQueue(s *session, what, queue string, args amqp091.Table, bind func(*amqp091.Channel) error) (<-chan amqp091.Delivery, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, classify("open channel for "+what, err)
	}
	b.watchChannel(s, what, ch)
	if _, err := ch.QueueDeclare(queue, false, true, false, false, args); err != nil {
		return nil, classify("declare queue "+queue, err)
	}
	if bind != nil {
		if err := bind(ch); err != nil {
			return nil, classify("bind queue "+queue, err)
		}
	}
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		return nil, classify("consume "+queue, err)
	}
	return deliveries, nil
}

// openPublisher opens a publish channel on s, in confirm mode, with its
// returns watched. When RabbitMQ closes it for a soft error (a publish
// the user's permissions refuse: ACCESS_REFUSED to an exchange) another
// replaces it, and the session, its consumers and the rpc:// results
// queue with them, goes on; any other close kills the session.
func (b *Broker) openPublisher(s *session) (*publisher, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, classify("open publish channel", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, classify("enable publisher confirms", err)
	}
	p := &publisher{ch: ch, done: make(chan struct{})}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	b.watchReturns(s, p)
	b.wg.Go(func() {
		err, ok := <-closed
		if ok {
			p.err = err
		}
		close(p.done)
		if err == nil || !err.Server || !err.Recover || !s.alive() {
			if err != nil {
				s.fail(fmt.Errorf("publish channel closed: %w", err))
			} else {
				s.fail(errors.New("publish channel closed"))
			}
			return
		}
		// The publish that met the refusal answers it (see publish).
		b.log.Debug("RabbitMQ closed the publish channel; opening another", slog.Any("err", err))
		np, oerr := b.openPublisher(s)
		if oerr != nil {
			s.fail(fmt.Errorf("reopen the publish channel after %v: %w", err, oerr))
			return
		}
		s.setPublisher(np)
	})
	return p, nil
}

// watchConn kills s when its connection closes and tracks flow control.
// It runs on goroutines the Broker waits for; they end when the
// connection does.
func (b *Broker) watchConn(s *session) {
	closed := s.conn.NotifyClose(make(chan *amqp091.Error, 1))
	// amqp091 delivers blocking notices synchronously from its reader, so
	// this channel must be drained until the connection closes it.
	blocked := s.conn.NotifyBlocked(make(chan amqp091.Blocking, 1))
	b.wg.Go(func() {
		err, ok := <-closed
		if ok && err != nil {
			s.fail(err)
		} else {
			s.fail(errors.New("connection closed"))
		}
	})
	b.wg.Go(func() {
		for bl := range blocked {
			if bl.Active && !s.blocked.Load() {
				b.log.Warn("RabbitMQ blocks publishing", slog.String("reason", bl.Reason))
			} else if !bl.Active && s.blocked.Load() {
				b.log.Info("RabbitMQ unblocked publishing")
			}
			s.blocked.Store(bl.Active)
		}
	})
}

// watchChannel kills s when one of its long-lived channels closes.
func (b *Broker) watchChannel(s *session, what string, ch *amqp091.Channel) {
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	b.wg.Go(func() {
		err, ok := <-closed
		if ok && err != nil {
			s.fail(fmt.Errorf("%s channel closed: %w", what, err))
		} else {
			s.fail(fmt.Errorf("%s channel closed", what))
		}
	})
}

// supervise keeps a session up until Close. s is the session New opened,
// or nil.
func (b *Broker) supervise(s *session) {
	backoff := b.minBackoff
	established := s != nil
	failing := false
	for {
		if s == nil {
			ns, err := b.connect(b.stopCtx)
			if b.stopCtx.Err() != nil {
				if ns != nil {
					_ = ns.close(b.opTimeout)
				}
				return
			}
			if err != nil {
				if !failing {
					b.log.Warn("cannot connect to RabbitMQ; retrying", slog.Any("err", err), slog.Duration("retry_in", backoff))
				} else {
					b.log.Debug("still cannot connect to RabbitMQ", slog.Any("err", err), slog.Duration("retry_in", backoff))
				}
				failing = true
				if !sleep(b.stopCtx, backoff) {
					return
				}
				backoff = min(backoff*2, b.maxBackoff)
				continue
			}
			if !b.setSession(ns) {
				_ = ns.close(b.opTimeout)
				return
			}
			if established {
				b.reconnects.Add(1)
				b.log.Info("reconnected to RabbitMQ")
			} else {
				b.log.Info("connected to RabbitMQ")
			}
			established, failing, s = true, false, ns
		}

		select {
		case <-s.done:
		case <-b.stopCtx.Done():
			return
		}
		if b.stopCtx.Err() != nil {
			return // Close closed it
		}
		b.clearSession(s)
		b.log.Warn("lost the RabbitMQ connection; reconnecting", slog.Any("err", s.cause()))
		// A channel may have died with the connection still open.
		_ = s.close(b.opTimeout)
		// A connection that lived a while starts over with short pauses;
		// one that keeps dying right away backs off.
		if time.Since(s.started) > b.maxBackoff {
			backoff = b.minBackoff
		}
		s = nil
		if !sleep(b.stopCtx, backoff) {
			return
		}
		backoff = min(backoff*2, b.maxBackoff)
	}
}

// setSession publishes s, unless the Broker was closed meanwhile.
func (b *Broker) setSession(s *session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.sess = s
	close(b.changed)
	b.changed = make(chan struct{})
	return true
}

// clearSession withdraws s if it is still the current session.
func (b *Broker) clearSession(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess != s {
		return
	}
	b.sess = nil
	close(b.changed)
	b.changed = make(chan struct{})
}

// current returns the live session, or an error wrapping
// celery.ErrUnavailable at once when there is none.
func (b *Broker) current(op string) (*session, error) {
	b.mu.Lock()
	s, closed := b.sess, b.closed
	b.mu.Unlock()
	if closed {
		return nil, errClosed(op)
	}
	if s == nil || !s.alive() {
		return nil, fmt.Errorf("amqp %s: not connected: %w", op, celery.ErrUnavailable)
	}
	return s, nil
}

// waitSession waits for a live session until ctx ends or the Broker is
// closed.
func (b *Broker) waitSession(ctx context.Context) (*session, error) {
	for {
		b.mu.Lock()
		s, closed, changed := b.sess, b.closed, b.changed
		b.mu.Unlock()
		if closed {
			return nil, errClosed("wait for connection")
		}
		if s != nil && s.alive() {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// maxUnanswered is how many calls one session may have stuck (see
// session.unanswered) before bounded refuses new ones without trying. A
// broker that left this many calls unanswered for a whole op timeout each
// is not answering: the next call would only wait as long and add a
// goroutine. Calls work again as soon as stuck ones return, on this
// connection or on the next.
const maxUnanswered = 32

// bounded runs fn, whose AMQP calls cannot be interrupted, on its own
// goroutine and waits for it at most until ctx ends, the op timeout passes
// or s dies. If we stop waiting, discard (when not nil) gets what fn
// produces later. fn's errors are classified by classify. While
// maxUnanswered earlier calls on s are still stuck it fails at once.
func bounded[T any](ctx context.Context, b *Broker, s *session, op string, fn func() (T, error), discard func(T)) (T, error) {
	var zero T
	if err := ctxErr(ctx); err != nil {
		return zero, fmt.Errorf("amqp %s: %w", op, err)
	}
	if n := s.unanswered.Load(); n >= maxUnanswered {
		return zero, fmt.Errorf("amqp %s: the broker has not answered %d calls on this connection: %w", op, n, celery.ErrUnavailable)
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	if !b.spawn(func() {
		v, err := fn()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			s.unanswered.Add(-1)
			if err == nil && discard != nil {
				discard(v)
			}
			return
		}
		res <- result{v, err}
	}) {
		return zero, errClosed(op)
	}
	finish := func(r result) (T, error) {
		if r.err != nil {
			if cerr := ctxErr(ctx); cerr != nil {
				return zero, fmt.Errorf("amqp %s: %w", op, cerr)
			}
			return zero, classify(op, r.err)
		}
		return r.v, nil
	}
	// abandon stops waiting, unless fn finished after all.
	abandon := func() (result, bool) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-res:
			return r, true
		default:
			abandoned = true
			s.unanswered.Add(1)
			return result{}, false
		}
	}
	select {
	case r := <-res:
		return finish(r)
	case <-octx.Done():
		if r, ok := abandon(); ok {
			return finish(r)
		}
		if cerr := ctxErr(ctx); cerr != nil {
			return zero, fmt.Errorf("amqp %s: %w", op, cerr)
		}
		return zero, fmt.Errorf("amqp %s: no answer within %s: %w", op, b.opTimeout, celery.ErrUnavailable)
	case <-s.done:
		if r, ok := abandon(); ok {
			return finish(r)
		}
		return zero, fmt.Errorf("amqp %s: connection lost: %w", op, celery.ErrUnavailable)
	}
}

// withChannel runs fn with a throwaway channel of the current session,
// bounded like every call. fn may find the channel closed by a channel
// error (a 404 on a passive declare does that) and open another through
// the channels argument; all of them are closed afterwards.
func (b *Broker) withChannel(ctx context.Context, op string, fn func(c *channels) error) error {
	s, err := b.current(op)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, b, s, op, func() (struct{}, error) {
		c := &channels{conn: s.conn}
		defer c.close()
		return struct{}{}, fn(c)
	}, nil)
	return err
}

// channels hands out a usable channel, replacing one that a channel error
// closed.
type channels struct {
	conn *amqp091.Connection
	all  []*amqp091.Channel
}

// get returns the last channel if it is still open, or opens a new one.
func (c *channels) get() (*amqp091.Channel, error) {
	if n := len(c.all); n > 0 && !c.all[n-1].IsClosed() {
		return c.all[n-1], nil
	}
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, err
	}
	c.all = append(c.all, ch)
	return ch, nil
}

func (c *channels) close() {
	for _, ch := range c.all {
		_ = ch.Close()
	}
}

// classify wraps an amqp091 error. A refusal from the broker that leaves
// the connection usable (AMQP's soft errors) is no outage: ACCESS_REFUSED,
// the vhost permissions of stamen's user not covering a queue or exchange,
// is a celery.RefusedError quoting RabbitMQ's reason; the others (not
// found, precondition failed) stay plain errors. Anything else means the
// broker is unavailable.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if refused := accessRefused(err); refused != nil {
		return fmt.Errorf("amqp %s: %w", op, refused)
	}
	var aerr *amqp091.Error
	if errors.As(err, &aerr) && aerr.Server && aerr.Recover {
		return fmt.Errorf("amqp %s: %w", op, err)
	}
	return fmt.Errorf("amqp %s: %w: %w", op, celery.ErrUnavailable, err)
}

// accessRefused is RabbitMQ's channel-level ACCESS_REFUSED (403) within
// err as a celery.RefusedError, or nil. Its reason names the resource,
// the vhost and the user ("ACCESS_REFUSED - access to queue 'q' in vhost
// 'v' refused for user 'u'"), never a password. The same 403 closing the
// connection (a login or vhost refused) is not one: that is the broker
// refusing the connection, which New reports and the supervisor retries.
func accessRefused(err error) *celery.RefusedError {
	var aerr *amqp091.Error
	if errors.As(err, &aerr) && aerr.Server && aerr.Recover && aerr.Code == amqp091.AccessRefused {
		return &celery.RefusedError{Reply: aerr.Reason}
	}
	return nil
}

// isRefusal reports whether err is the broker refusing us for good: bad
// credentials, no access to the vhost, a conflicting declaration. Retrying
// cannot help with those, unlike a broker that is down.
func isRefusal(err error) bool {
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) {
		return false
	}
	switch aerr.Code {
	case amqp091.AccessRefused, amqp091.NotAllowed, amqp091.PreconditionFailed:
		return true
	}
	return false
}

// isNotFound reports a 404 NOT_FOUND from the broker.
func isNotFound(err error) bool {
	var aerr *amqp091.Error
	return errors.As(err, &aerr) && aerr.Code == amqp091.NotFound
}

// ctxErr is ctx.Err(), or DeadlineExceeded as soon as the deadline has
// passed: a timer derived from ctx can fire a moment before ctx itself
// notices.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// sleep waits d or until ctx ends, reporting whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
