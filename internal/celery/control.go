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
}

// ControlReply is one worker's answer: the body {"<hostname>": value}.
type ControlReply struct {
	Hostname string
	Value    json.RawMessage
}
