package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

const (
	childEnv    = "STAMEN_TESTCLUSTER_NAMESPACE_CHILD"
	probeQueue  = "namespace-probe"
	probeDB     = 13
	childMarker = "NAMESPACE "
)

// TestProcessNamespaces runs a second process of this test binary, as a
// concurrent `go test` of the same package would, while this one holds a key
// in Redis database 13 and a message in a queue: the other process flushes
// database 13 and deletes a queue of the same name, and neither reaches this
// process's. Once it has exited, its redis-server and its vhost are gone.
func TestProcessNamespaces(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		namespaceChild(t)
		return
	}
	RequireRedis(t)
	RequireRabbitMQ(t)
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr(), DB: probeDB})
	defer rdb.Close()
	if err := rdb.Set(ctx, "owner", os.Getpid(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	ch := amqpChannel(t, Vhost)
	if _, err := ch.QueueDeclare(probeQueue, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, "", probeQueue, false, false, amqp091.Publishing{Body: []byte("mine")}); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestProcessNamespaces$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the other process failed: %v\n%s", err, out)
	}
	var childRedis, childVhost string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), childMarker); ok {
			fmt.Sscanf(rest, "redis=%s vhost=%s", &childRedis, &childVhost)
		}
	}
	if childRedis == "" || childVhost == "" {
		t.Fatalf("the other process did not say where it ran:\n%s", out)
	}
	t.Logf("this process: redis %s, vhost %s; the other: redis %s, vhost %s", RedisAddr(), Vhost, childRedis, childVhost)
	if childRedis == RedisAddr() || childVhost == Vhost {
		t.Fatalf("the other process shared a namespace: redis %s, vhost %s", childRedis, childVhost)
	}
	if owner, err := rdb.Get(ctx, "owner").Result(); err != nil || owner != strconv.Itoa(os.Getpid()) {
		t.Errorf("key in database %d after the other process flushed its own: %q, %v", probeDB, owner, err)
	}
	if q, err := ch.QueueDeclarePassive(probeQueue, false, true, false, false, nil); err != nil || q.Messages != 1 {
		t.Errorf("queue %s after the other process deleted its own: %+v, %v", probeQueue, q, err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", childRedis, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the other process's redis-server still answers on %s 10 s after it exited", childRedis)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.CommandContext(ctx, "rabbitmqctl", "-q", "list_vhosts", "name").CombinedOutput()
		if err != nil {
			t.Fatalf("rabbitmqctl list_vhosts: %v: %s", err, out)
		}
		if !strings.Contains("\n"+string(out)+"\n", "\n"+childVhost+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vhost %s still exists 2 min after its process exited", childVhost)
		}
		time.Sleep(time.Second)
	}
}

// namespaceChild is the other process: it does what would hurt a
// neighbour sharing its namespaces.
func namespaceChild(t *testing.T) {
	RequireRedis(t)
	RequireRabbitMQ(t)
	FlushRedisDB(t, probeDB)
	DeleteAMQPQueues(t, Vhost, probeQueue)
	fmt.Printf("%sredis=%s vhost=%s\n", childMarker, RedisAddr(), Vhost)
}

// amqpChannel is a channel on vhost, closed after the test.
func amqpChannel(t *testing.T, vhost string) *amqp091.Channel {
	t.Helper()
	conn, err := amqp091.DialConfig(AMQPURL(vhost), amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
