package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestNewRejectsUnknownMasterName: sentinels that answer but know no
// master of the transport options' master_name (a typo) stop New with an
// error that names them and the name, as a wrong password does, instead
// of New succeeding and every call then failing as if the sentinels were
// unreachable. The error shows no password. The right name connects.
func TestNewRejectsUnknownMasterName(t *testing.T) {
	needRedis(t)
	s := testcluster.StartSentinel(t)
	kwargs := &SentinelKwargs{Password: s.Password}
	right := TransportOptions{MasterName: testcluster.SentinelMaster, SentinelKwargs: kwargs}
	typo := TransportOptions{MasterName: "stamenmastr", SentinelKwargs: kwargs}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // the error's text, "" for none
	}{
		{"known", Config{BrokerURL: s.URL(0), Transport: right, ResultBackendURL: s.URL(1), ResultTransport: right}, ""},
		{"broker", Config{BrokerURL: s.URL(0), Transport: typo},
			fmt.Sprintf(`broker sentinel://:********@127.0.0.1:%d/0;sentinel://:********@127.0.0.1:%d/0: sentinels at 127.0.0.1:%d know no master named "stamenmastr"`,
				s.DeadPort, s.Port, s.Port)},
		{"result backend", Config{BrokerURL: s.URL(0), Transport: right, ResultBackendURL: s.URL(1), ResultTransport: typo},
			fmt.Sprintf(`result backend sentinel://:********@127.0.0.1:%d/1;sentinel://:********@127.0.0.1:%d/1: sentinels at 127.0.0.1:%d know no master named "stamenmastr"`,
				s.DeadPort, s.Port, s.Port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.OpTimeout, tc.cfg.Logger = 2*time.Second, testLogger(t)
			start := time.Now()
			b, err := New(t.Context(), tc.cfg)
			if err == nil {
				defer b.Close()
				// The master is reached: a call works.
				if _, err := b.QueueLengths(t.Context(), []string{"celery"}); tc.want == "" && err != nil {
					t.Errorf("QueueLengths: %v", err)
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("New with master_name %q succeeded; want %q", tc.cfg.Transport.MasterName, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("New: %v\nwant it to say %s", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), s.Password) {
				t.Errorf("error reveals the password: %v", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("New took %v", d)
			}
		})
	}
}

// TestMasterNameLostWhileRunning: sentinels that stop knowing the master's
// name while stamen runs (one being reconfigured) are an outage, not a
// refusal: calls answer ErrUnavailable (503) while it lasts, and work
// again once the sentinels know the master again.
func TestMasterNameLostWhileRunning(t *testing.T) {
	needRedis(t)
	s := testcluster.StartSentinel(t)
	b, err := New(t.Context(), Config{BrokerURL: s.URL(0), OpTimeout: 2 * time.Second, Logger: testLogger(t),
		Transport: TransportOptions{MasterName: testcluster.SentinelMaster, SentinelKwargs: &SentinelKwargs{Password: s.Password}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.QueueLengths(t.Context(), []string{"celery"}); err != nil {
		t.Fatal(err)
	}
	sentinel := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Port), Password: s.Password})
	defer sentinel.Close()
	master := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Master.Port), Password: s.Password})
	defer master.Close()
	if err := sentinel.Do(t.Context(), "SENTINEL", "REMOVE", testcluster.SentinelMaster).Err(); err != nil {
		t.Fatal(err)
	}
	// stamen's connections to the master go, so that its next call asks
	// the sentinels where the master is.
	if err := master.Do(t.Context(), "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = b.QueueLengths(t.Context(), []string{"celery"})
	if !errors.Is(err, celery.ErrUnavailable) {
		t.Fatalf("QueueLengths while the sentinels know no such master: %v, want ErrUnavailable", err)
	}
	for _, args := range [][]any{
		{"SENTINEL", "MONITOR", testcluster.SentinelMaster, "127.0.0.1", s.Master.Port, 1},
		{"SENTINEL", "SET", testcluster.SentinelMaster, "auth-pass", s.Password},
	} {
		if err := sentinel.Do(t.Context(), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.Eventually(t, 10*time.Second, "a call once the sentinels know the master again", func() bool {
		_, err := b.QueueLengths(t.Context(), []string{"celery"})
		return err == nil
	})
}
