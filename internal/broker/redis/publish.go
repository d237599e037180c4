package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
)

// Publish puts msg on its queue's list, in the priority sub-queue its
// priority selects. Workers BRPOP the other end, so the queue is FIFO.
// A message given an exchange goes, as kombu routes it, to every queue
// bound to that exchange with its routing key, found in kombu's binding
// set; none is celery.ErrNoRoute.
func (b *Broker) Publish(ctx context.Context, msg *celery.TaskMessage) error {
	env, err := msg.RedisEnvelope()
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("publish %s: %w", msg.ID, err)
	}
	queues := []string{celery.QueueName(msg)}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	if exchange, routingKey := celery.Route(msg); exchange != "" {
		members, err := b.client.SMembers(octx, b.keys.Binding(exchange)).Result()
		if err != nil {
			return wrap(ctx, "publish "+msg.ID+": bindings of exchange "+exchange, err)
		}
		queues = b.keys.BoundQueues(members, routingKey)
		if len(queues) == 0 {
			return fmt.Errorf("publish %s: exchange %q with routing key %q: %w", msg.ID, exchange, routingKey, celery.ErrNoRoute)
		}
	}
	for _, q := range queues {
		if kombuKey(q) {
			return fmt.Errorf("publish %s: queue %q: %w", msg.ID, q, celery.ErrNotAQueue)
		}
	}
	if len(queues) > 1 {
		// MULTI does not undo the commands before a failed one: an LPUSH
		// refused with WRONGTYPE would leave the message on the other
		// queues while the caller is told it was not sent, and sends it
		// again. So a fan-out first looks that every list is one.
		if err := b.checkLists(octx, ctx, msg, queues); err != nil {
			return err
		}
	}
	pushes := make([]*goredis.IntCmd, len(queues))
	_, err = b.client.TxPipelined(octx, func(p goredis.Pipeliner) error {
		for i, q := range queues {
			pushes[i] = p.LPush(octx, b.keys.Queue(q, msg.Priority), data)
		}
		return nil
	})
	if err != nil {
		for i, c := range pushes {
			// WRONGTYPE: the key exists and holds something else than a list.
			if goredis.HasErrorPrefix(c.Err(), "WRONGTYPE") {
				return fmt.Errorf("publish %s: queue %q: %w", msg.ID, queues[i], celery.ErrNotAQueue)
			}
		}
		return wrap(ctx, "publish "+msg.ID, err)
	}
	return nil
}

// checkLists returns celery.ErrNotAQueue, naming the queue, when one of
// queues' lists for msg's priority is a key of another type.
func (b *Broker) checkLists(octx, ctx context.Context, msg *celery.TaskMessage, queues []string) error {
	types := make([]*goredis.StatusCmd, len(queues))
	_, err := b.client.Pipelined(octx, func(p goredis.Pipeliner) error {
		for i, q := range queues {
			types[i] = p.Type(octx, b.keys.Queue(q, msg.Priority))
		}
		return nil
	})
	if err != nil {
		return wrap(ctx, "publish "+msg.ID+": types of the bound queues", err)
	}
	for i, c := range types {
		if t := c.Val(); t != "list" && t != "none" {
			return fmt.Errorf("publish %s: queue %q: %w", msg.ID, queues[i], celery.ErrNotAQueue)
		}
	}
	return nil
}

// kombuKey reports whether a queue's list would be a key kombu's Redis
// transport keeps for itself (under the same global_keyprefix): its hash
// of unacknowledged messages, that hash's index and lock, an exchange's
// binding set. A list made there, even where the key is absent for now,
// breaks the workers' next write to it.
func kombuKey(queue string) bool {
	switch queue {
	case "unacked", "unacked_index", "unacked_mutex":
		return true
	}
	return strings.HasPrefix(queue, "_kombu.binding.")
}

// QueueLengths sums LLEN over each queue's priority lists in one round
// trip. Messages that workers have already fetched are not counted.
func (b *Broker) QueueLengths(ctx context.Context, queues []string) (map[string]int64, error) {
	out := make(map[string]int64, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	cmds := make(map[string][]*goredis.IntCmd, len(queues))
	octx, cancel := b.opContext(ctx)
	defer cancel()
	_, err := b.client.Pipelined(octx, func(p goredis.Pipeliner) error {
		for _, q := range queues {
			if _, seen := cmds[q]; seen {
				continue
			}
			for _, key := range b.keys.Queues(q) {
				cmds[q] = append(cmds[q], p.LLen(octx, key))
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(ctx, "queue lengths", err)
	}
	for q, cs := range cmds {
		var n int64
		for _, c := range cs {
			n += c.Val()
		}
		out[q] = n
	}
	return out, nil
}

// Purge empties a queue: its list and every priority list kombu keeps for
// it (the sep- and priority_steps-named siblings, under global_keyprefix),
// in one MULTI so that a message published meanwhile is either counted and
// deleted or left whole. It returns how many messages were deleted.
// Messages workers have already fetched (kombu's unacked hash) are not
// touched, as kombu's own purge leaves them.
func (b *Broker) Purge(ctx context.Context, queue string) (int64, error) {
	if kombuKey(queue) {
		return 0, fmt.Errorf("queue %q: %w", queue, celery.ErrNotAQueue)
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	keys := b.keys.Queues(queue)
	lens := make([]*goredis.IntCmd, 0, len(keys))
	// DEL deletes whatever a key holds, and in a MULTI a command that fails
	// (LLEN of a hash: WRONGTYPE) does not stop the others: without this
	// check, purging "unacked" or "_kombu.binding.celery" would delete
	// kombu's unacknowledged messages or its bindings. WATCH makes the
	// check and the DEL one: a key whose type changes in between fails the
	// transaction, and the purge is tried again.
	purge := func(tx *goredis.Tx) error {
		for _, key := range keys {
			typ, err := tx.Type(octx, key).Result()
			if err != nil {
				return err
			}
			if typ != "none" && typ != "list" {
				return fmt.Errorf("key %q holds a %s: %w", key, typ, celery.ErrNotAQueue)
			}
		}
		lens = lens[:0]
		_, err := tx.TxPipelined(octx, func(p goredis.Pipeliner) error {
			for _, key := range keys {
				lens = append(lens, p.LLen(octx, key))
			}
			p.Del(octx, keys...)
			return nil
		})
		return err
	}
	var err error
	for range 3 {
		if err = b.client.Watch(octx, purge, keys...); !errors.Is(err, goredis.TxFailedErr) {
			break
		}
	}
	if errors.Is(err, celery.ErrNotAQueue) {
		return 0, err
	}
	if err != nil {
		return 0, wrap(ctx, "purge "+queue, err)
	}
	var n int64
	for _, c := range lens {
		n += c.Val()
	}
	return n, nil
}
