package handlers

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/stamen-dev/stamen/internal/stream"
)

// TestWriteSSEKeepsWorkerTextInItsLines: an event's JSON with line breaks
// between its tokens arrives whole (SSE joins data lines with a line
// break), and an event type with a line break, which would let a worker
// write an id or an event of its own, is not sent.
func TestWriteSSEKeepsWorkerTextInItsLines(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	writeSSE(w, &stream.Message{Type: "task-failed", ID: "ab:7", Data: []byte("{\"a\":\r\n\n1}")})
	writeSSE(w, &stream.Message{Type: "task-x\nid: ab:1\ndata: {}", ID: "ab:8", Data: []byte(`{}`)})
	writeSSE(w, &stream.Message{Type: "task-x\rid: ab:1", ID: "ab:9", Data: []byte(`{}`)})
	writeSSE(w, &stream.Message{Type: "worker-heartbeat", Data: []byte(`{"b":2}`)})
	w.Flush()
	want := "id: ab:7\nevent: task-failed\ndata: {\"a\": \ndata: \ndata: 1}\n\nevent: worker-heartbeat\ndata: {\"b\":2}\n\n"
	if buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
}
