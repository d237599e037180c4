package testcluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestSentinelPromotesTheReplica checks the helper itself: a key written
// through the sentinel's master is on the replica the sentinel promotes
// once the master is killed, and the failover client writes to it then.
func TestSentinelPromotesTheReplica(t *testing.T) {
	SkipIfShort(t, "starts redis-server and redis-sentinel")
	s := StartSentinel(t)
	c := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName: SentinelMaster, SentinelAddrs: []string{"127.0.0.1:" + strconv.Itoa(s.Port)},
		SentinelPassword: s.Password, Password: s.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.waitFor(10*time.Second, "the key on the replica", func(ctx context.Context) bool {
		v, err := s.client(s.Replica.Port).Get(ctx, "k").Result()
		return err == nil && v == "before"
	})
	s.KillMaster()
	s.waitFor(10*time.Second, "a write through the failover client to land on the new master", func(ctx context.Context) bool {
		if c.Set(ctx, "k", "after", 0).Err() != nil {
			return false
		}
		v, err := s.client(s.Replica.Port).Get(ctx, "k").Result()
		return err == nil && v == "after"
	})
}
