package testcluster

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// DeleteAMQPQueues deletes queues, with whatever messages they hold, from
// vhost on the local test RabbitMQ; a queue that does not exist is fine.
// RabbitMQ queues outlive the tests that declared them, so a test that
// needs a known starting point calls this before its workers declare them:
// messages an earlier run left would otherwise reach this run's workers,
// and a queue an earlier run declared with other arguments (x-max-priority)
// makes the workers' declaration fail with 406 PRECONDITION_FAILED.
func DeleteAMQPQueues(t testing.TB, vhost string, queues ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := amqp091.DialConfig(AMQPURL(vhost), amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("testcluster: connect to RabbitMQ vhost %s: %v (see scripts/services.sh)", vhost, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("testcluster: open a channel on vhost %s: %v", vhost, err)
	}
	defer ch.Close()
	// amqp091's synchronous methods take no context: bound them by running
	// them aside and closing the connection if they do not answer.
	done := make(chan error, 1)
	go func() {
		for _, q := range queues {
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = conn.Close()
		err = <-done
	}
	if err != nil {
		t.Fatalf("testcluster: delete queues %v from vhost %s: %v", queues, vhost, err)
	}
}
