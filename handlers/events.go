package handlers

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/internal/stream"
	evops "github.com/stamen-dev/stamen/restapi/operations/events"
)

// sseBuffer is how many events a slow client may fall behind before it
// loses some (it is told how many in a comment).
const sseBuffer = 1024

func (h *Handlers) streamEvents(p evops.StreamEventsParams, _ any) middleware.Responder {
	f := stream.Filter{Task: deref(p.Taskname), Worker: deref(p.Workername)}
	for _, t := range strings.Split(deref(p.Type), ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.Types = append(f.Types, t)
		}
	}
	sub, err := h.Events.Subscribe(f, sseBuffer)
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "%d event streams are open, the most stamen serves at once (--max_event_streams)", h.Events.Max())
	}
	// A raw writer, not a generated responder: the body is an unending
	// stream of events, each flushed as it comes, which no model or
	// producer writes.
	return middleware.ResponderFunc(func(rw http.ResponseWriter, _ runtime.Producer) {
		defer h.Events.Unsubscribe(sub)
		h.serveSSE(rw, p.HTTPRequest, sub)
	})
}

func (h *Handlers) serveSSE(rw http.ResponseWriter, r *http.Request, sub *stream.Subscription) {
	rc := http.NewResponseController(rw)
	hdr := rw.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	// Tell nginx-style proxies not to buffer the stream.
	hdr.Set("X-Accel-Buffering", "no")
	rw.WriteHeader(http.StatusOK)

	w := bufio.NewWriter(rw)
	flush := func() bool {
		return w.Flush() == nil && rc.Flush() == nil
	}
	fmt.Fprintf(w, ": stamen event stream\nretry: 2000\n\n")
	if !flush() {
		return
	}
	beat := time.NewTicker(h.SSEHeartbeat)
	defer beat.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if n := sub.Dropped(); n > 0 {
				fmt.Fprintf(w, ": dropped %d events\n\n", n)
			}
			fmt.Fprintf(w, ": heartbeat %d\n\n", h.Now().Unix())
		case m, ok := <-sub.C:
			if !ok {
				return
			}
			writeSSE(w, &m)
			// Drain what is already queued before flushing once.
			for drained := false; !drained; {
				select {
				case m, ok := <-sub.C:
					if !ok {
						flush()
						return
					}
					writeSSE(w, &m)
				default:
					drained = true
				}
			}
		}
		if !flush() {
			return
		}
	}
}

// writeSSE writes one event. Its id goes before its data, so that a
// client has it when the event is dispatched. What a worker sent cannot
// add lines of its own: an event type with a line break (JSON lets a
// worker put one in) is not sent, and the line breaks JSON allows between
// its tokens go on data lines of their own, which SSE joins back.
func writeSSE(w *bufio.Writer, m *stream.Message) {
	if strings.ContainsAny(m.Type, "\r\n") || strings.ContainsAny(m.ID, "\r\n") {
		return
	}
	if m.ID != "" {
		fmt.Fprintf(w, "id: %s\n", m.ID)
	}
	fmt.Fprintf(w, "event: %s\n", m.Type)
	data := m.Data
	for {
		// A CR outside a JSON string is whitespace, and inside one it is
		// always escaped: a space stands for it.
		line, rest, more := bytes.Cut(data, []byte("\n"))
		w.WriteString("data: ")
		if bytes.IndexByte(line, '\r') < 0 {
			w.Write(line)
		} else {
			for _, c := range line {
				if c == '\r' {
					c = ' '
				}
				w.WriteByte(c)
			}
		}
		w.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	w.WriteByte('\n')
}
