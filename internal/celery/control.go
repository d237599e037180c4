package celery

import "encoding/json"

// ControlCommand is a pidbox remote-control request.
type ControlCommand struct {
	Method    string
	Arguments map[string]any
	// Destination lists the node names that should act; nil means all.
	Destination []string
	// Reply asks the workers to answer; without it nothing comes back.
	Reply bool
	// Limit stops collecting after this many replies; 0 means
	// len(Destination), or wait until the deadline when Destination is nil.
	Limit int
	// Expect stops collecting as soon as each of these node names has
	// answered, whatever Limit says: a broadcast to all workers that knows
	// which ones are alive need not wait the deadline for the others.
	// Replies from other nodes are still collected until then.
	Expect []string
}

// Collected reports whether collecting replies to c can stop with these
// replies: Limit (or len(Destination)) of them arrived, or every node in
// Expect answered.
func (c ControlCommand) Collected(replies []ControlReply) bool {
	limit := c.Limit
	if limit <= 0 {
		limit = len(c.Destination)
	}
	if limit > 0 && len(replies) >= limit {
		return true
	}
	if len(c.Expect) == 0 || len(replies) < len(c.Expect) {
		return false
	}
	seen := make(map[string]struct{}, len(replies))
	for _, r := range replies {
		seen[r.Hostname] = struct{}{}
	}
	for _, h := range c.Expect {
		if _, ok := seen[h]; !ok {
			return false
		}
	}
	return true
}

// ControlReply is one worker's answer: the body {"<hostname>": value}.
type ControlReply struct {
	Hostname string
	Value    json.RawMessage
}
