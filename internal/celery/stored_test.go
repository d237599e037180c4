package celery

import "testing"

func TestStoredEventLocalReceived(t *testing.T) {
	const hb = `{"type": "worker-heartbeat", "hostname": "w@h", "timestamp": 1700000000.5, "freq": 2.0}`
	cases := []struct {
		name string
		raw  string
		at   float64
		want float64 // LocalReceived after the round trip
	}{
		{"stamped", hb, 1700000003.25, 1700000003.25},
		{"trailing space", hb + " \n", 1700000003.25, 1700000003.25},
		{"not known: the event's timestamp", hb, 0, 1700000000.5},
		{"stored before the stamp: the event's timestamp", hb, -1, 1700000000.5},
		// A sender's own local_received is not Celery's receive time: ours,
		// the last key, wins.
		{"sender's key overridden", `{"type": "worker-heartbeat", "hostname": "w@h", "timestamp": 1700000000.5, "local_received": 1}`, 1700000009, 1700000009},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(c.raw)
			if c.at >= 0 {
				raw = WithLocalReceived(raw, c.at)
			}
			evs, err := DecodeStoredEvents(raw)
			if err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			if len(evs) != 1 || evs[0].LocalReceived != c.want || evs[0].Hostname != "w@h" || evs[0].Timestamp != 1700000000.5 {
				t.Fatalf("%s: got %+v, want LocalReceived %v", raw, evs, c.want)
			}
		})
	}
	// What is not an object is kept as it is.
	for _, raw := range []string{`[]`, `"x"`, ``} {
		if got := string(WithLocalReceived([]byte(raw), 5)); got != raw {
			t.Errorf("WithLocalReceived(%q) = %q", raw, got)
		}
	}
	if got := string(WithLocalReceived([]byte(`{}`), 5)); got != `{"local_received":5}` {
		t.Errorf("WithLocalReceived({}) = %s", got)
	}
}
