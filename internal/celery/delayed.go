package celery

import (
	"strconv"
	"strings"
	"time"
)

// Native delayed delivery (Celery 5.5+ with kombu 5.5+ on RabbitMQ): a
// quorum queue gives no global QoS, so a worker that fetched a countdown
// task early would hold it, and a prefetch slot, until its eta. Celery's
// client therefore sends such a task into a cascade of 28 topic exchanges
// and TTL queues, celery_delayed_27 down to celery_delayed_0, that the
// workers declare. Level n holds a message for 2^n seconds when bit n of
// its countdown is 1; the last level dead-letters it to the
// celery_delayed_delivery topic exchange, to which the workers bind each
// queue's exchange with "#.<the queue's routing key>".
const (
	// DelayedEntryExchange is where a delayed message enters the cascade.
	DelayedEntryExchange = "celery_delayed_27"
	// DelayedDeliveryExchange is where the cascade hands messages back to
	// the queues' own exchanges.
	DelayedDeliveryExchange = "celery_delayed_delivery"
	// delayedBits is the number of levels: the longest delay is 2^28-1 s.
	delayedBits = 28
	// delayedSlack is how late after its eta the cascade may hand over a
	// task rather than a second early.
	delayedSlack = 250 * time.Millisecond
)

// DelayedRoutingKey is the routing key of a message delayed by countdown
// whole seconds on its way to routingKey: the countdown as 28 binary
// digits, most significant first, each followed by a dot, then routingKey
// (kombu's calculate_routing_key). ok is false when the countdown does not
// fit the cascade (below 1 s, or 2^28 s and more) or routingKey is empty.
func DelayedRoutingKey(countdown int64, routingKey string) (key string, ok bool) {
	if countdown < 1 || countdown >= 1<<delayedBits || routingKey == "" {
		return "", false
	}
	bits := strconv.FormatInt(countdown, 2)
	var b strings.Builder
	b.Grow(2*delayedBits + len(routingKey))
	for i := range delayedBits {
		if j := i - (delayedBits - len(bits)); j >= 0 {
			b.WriteByte(bits[j])
		} else {
			b.WriteByte('0')
		}
		b.WriteByte('.')
	}
	b.WriteString(routingKey)
	return b.String(), true
}

// DelayedRoute is the exchange and routing key Celery's client (5.5+,
// app.send_task) publishes a task for q with, when its eta is countdown
// away and the client knows a quorum queue: the cascade's entry, with the
// whole seconds left (one more when the next is less than delayedSlack
// away) and the queue's own routing key. The worker holds the message for
// any fraction of a second left, as the eta header says. ok is
// false when the task must go as before, straight to its queue: q is not a
// quorum queue, its exchange is direct (the workers do not bind direct
// exchanges to the cascade, so the message would be lost), or the delay
// does not fit the cascade.
func DelayedRoute(q *QueueDeclaration, countdown time.Duration) (exchange, routingKey string, ok bool) {
	if !q.Quorum() || q.Exchange == "" || q.ExchangeType == "direct" {
		return "", "", false
	}
	// Whole seconds, truncated as Celery's int(countdown), after adding
	// delayedSlack: stamen turns a countdown into an eta when the request
	// arrives, so a countdown of 10 s has 9.99 s left when it is published,
	// and truncating would hand the task over a second early, for the
	// worker to hold in memory.
	key, ok := DelayedRoutingKey(int64((countdown+delayedSlack)/time.Second), q.RoutingKey)
	if !ok {
		return "", "", false
	}
	return DelayedEntryExchange, key, true
}
