package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	oaerrors "github.com/go-openapi/errors"
	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/redact"
)

// Every body the handlers write as JSON is encoded by encoding/json's
// Marshal, as writeJSON does, and not by the API's JSONProducer, which the
// generated responders are given: the producer ends a body with a newline
// and leaves <, > and & unescaped, so answering through it would change
// the bytes of every body, errors included, that clients and the tests
// that compare bodies byte for byte see today. The exceptions are the
// operations whose bodies came from the producer from the start (purgeQueue,
// listAudit, listTaskTypes, getQueueLengths, retryTask, revokeTasks,
// retryTasks, listFailures, getTaskStats, getWorkerStats, getSession):
// their handlers return the generated responder as it is. The others
// return it through encoded, which hands it a producer that writes Marshal's
// bytes.

// encoded writes a generated responder's body with Marshal's bytes and
// Content-Type application/json, whatever the request's Accept, as
// writeJSON does.
func encoded(r middleware.Responder) middleware.Responder {
	return middleware.ResponderFunc(func(rw http.ResponseWriter, _ runtime.Producer) {
		rw.Header().Set("Content-Type", "application/json")
		r.WriteResponse(rw, marshalJSON)
	})
}

// marshalJSON is the producer encoded gives: Marshal's bytes, a failed
// write ignored as writeJSON ignores it (the client has gone; the
// generated responders would panic on the error).
var marshalJSON = runtime.ProducerFunc(func(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the response: %w", err)
	}
	_, _ = w.Write(b)
	return nil
})

// jsonResponse writes any JSON-encodable body with a status code: Flower's
// result shape (resultBody), whose keys come in Flower's order (task-id,
// state, result, traceback), where the generated TaskResult model would
// write them in the alphabetical order of its fields.
type jsonResponse struct {
	status int
	body   any
}

func (j jsonResponse) WriteResponse(rw http.ResponseWriter, _ runtime.Producer) {
	writeJSON(rw, j.status, j.body)
}

// rawJSON writes bytes that are already JSON: the task and worker lists,
// streamed or assembled from the state's Flower-exact encodings, which no
// producer would write byte for byte (and a model of a million tasks would
// not fit in memory).
type rawJSON struct {
	status int
	body   []byte
	// header is added to the response's headers.
	header http.Header
}

func (r rawJSON) WriteResponse(rw http.ResponseWriter, _ runtime.Producer) {
	for k, vs := range r.header {
		rw.Header()[k] = vs
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(r.status)
	_, _ = rw.Write(r.body)
}

func writeJSON(rw http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"cannot encode the response"}`)
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_, _ = rw.Write(b)
}

// errorModel is the spec's Error model, {"error": "..."}, for msg, with
// any URL's password masked (a message may quote an error from a library
// that names a URL). Every error body stamen writes is one.
func errorModel(msg string) *models.Error {
	m := redact.String(msg)
	return &models.Error{Error: &m}
}

// errorResponse is an error answer: the spec's Error model with a status.
// One type for every operation, where go-swagger generates one per
// operation and status: the error paths (brokerError, storeError, control,
// publish) are shared by the operations and take the status from the
// error, so answering with the generated types would need a table of
// operation and status to type that the spec already holds. Its body is
// Marshal's, as encoded writes it. TestAnsweredStatusesAreDeclared checks
// that every status an operation answers is one the spec declares for it.
type errorResponse struct {
	status int
	body   *models.Error
}

func (e errorResponse) WriteResponse(rw http.ResponseWriter, _ runtime.Producer) {
	writeJSON(rw, e.status, e.body)
}

// text is the answer's message.
func (e errorResponse) text() string { return *e.body.Error }

// apiError is the one error responder of the handlers.
func apiError(status int, format string, args ...any) middleware.Responder {
	return errorResponse{status: status, body: errorModel(fmt.Sprintf(format, args...))}
}

// brokerError maps an error from a broker or result backend to a status code
// without revealing connection details (URLs may hold passwords).
func (h *Handlers) brokerError(op string, err error) middleware.Responder {
	var refused *celery.RefusedError
	switch {
	case errors.Is(err, celery.ErrResultLost):
		// The wait's time is up, as with a plain timeout, but the reason
		// is worth saying: the task may have run, and its result will not
		// come however long one waits.
		h.log.Warn("a result may have been lost with the broker connection", slog.String("op", op), slog.Any("err", err))
		return apiError(http.StatusGatewayTimeout, "%s: %v (the task may have run: see /api/task/info)", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return apiError(http.StatusGatewayTimeout, "%s: timed out", op)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this answer and nothing failed.
		h.log.Debug("broker call abandoned by the client", slog.String("op", op))
		return apiError(http.StatusServiceUnavailable, "%s: request cancelled", op)
	case errors.Is(err, celery.ErrNoQueue):
		// stamen will not create a queue unlike the workers would: the
		// client names a queue that no worker consumes yet.
		return apiError(http.StatusBadRequest, "%s: %v (start a worker consuming it, or add a consumer for it, first)", op, err)
	case errors.Is(err, celery.ErrNotAQueue):
		// The client named a key of kombu's (unacked, a binding set) or
		// another non-list key: nothing was written or deleted.
		return apiError(http.StatusBadRequest, "%s: %v", op, err)
	case errors.Is(err, celery.ErrNoRoute):
		// A route given in the request leads nowhere: the client's to fix.
		return apiError(http.StatusBadRequest, "%s: %v", op, err)
	case errors.Is(err, celery.ErrNoResultBackend):
		return apiError(http.StatusServiceUnavailable, "%s: no result backend configured", op)
	case errors.Is(err, celery.ErrUnsupported):
		return apiError(http.StatusServiceUnavailable, "%s: %v", op, err)
	case errors.As(err, &refused):
		// 502, not 503: repeating the call, here or on another replica
		// (load balancers retry a 503), gets the same refusal until the
		// broker account's permissions change; nor is it the client's
		// fault, as a 4xx would say (a 403 would read as stamen's own
		// roles refusing the caller). The server's reply names what the
		// account may not do.
		h.logRefusal(op, refused)
		return apiError(http.StatusBadGateway, "%s: %s", op, refused.Error())
	case errors.Is(err, celery.ErrUnavailable):
		h.log.Warn("broker unavailable", slog.String("op", op), slog.Any("err", err))
		return apiError(http.StatusServiceUnavailable, "Broker or result backend unavailable")
	default:
		h.log.Error("broker call failed", slog.String("op", op), slog.Any("err", err))
		return apiError(http.StatusServiceUnavailable, "Broker or result backend unavailable")
	}
}

// maxRefusals bounds the broker refusals logged once each.
const maxRefusals = 64

// logRefusal logs a broker's refusal once per operation and reply, not at
// every request that meets it: the account's permissions stay what they
// are until someone changes them. Past maxRefusals kinds, further ones go
// to the debug log.
func (h *Handlers) logRefusal(op string, refused *celery.RefusedError) {
	key := op + "\x00" + refused.Reply
	h.mu.Lock()
	_, seen := h.refusals[key]
	first := !seen && len(h.refusals) < maxRefusals
	if first {
		if h.refusals == nil {
			h.refusals = map[string]struct{}{}
		}
		h.refusals[key] = struct{}{}
	}
	h.mu.Unlock()
	if first {
		h.log.Error("the broker refused an operation to stamen's account; grant the permission (logged once)",
			slog.String("op", op), slog.String("reply", refused.Reply))
		return
	}
	h.log.Debug("the broker refused an operation to stamen's account", slog.String("op", op), slog.String("reply", refused.Reply))
}

// ServeError replaces go-openapi's default error writer, which answers
// validation failures with 422 {"code":6xx,"message":...}; Flower's clients
// expect 400 and stamen's contract is {"error": "..."} everywhere.
func ServeError(rw http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := err.Error()
	var (
		oaErr     oaerrors.Error
		composite *oaerrors.CompositeError
		notAllow  *oaerrors.MethodNotAllowedError
	)
	switch {
	case errors.As(err, &composite):
		status = http.StatusBadRequest
		if len(composite.Errors) > 0 {
			msg = composite.Errors[0].Error()
			// go-openapi's wording, `parsing options body from "" failed,
			// because <reason>`, names the body's parameter and its empty
			// "value": the reason alone tells the client what to fix.
			var parse *oaerrors.ParseError
			if errors.As(composite.Errors[0], &parse) && parse.In == "body" && parse.Reason != nil {
				msg = "invalid body: " + parse.Reason.Error()
			}
			var inner oaerrors.Error
			if errors.As(composite.Errors[0], &inner) && inner.Code() < 600 && inner.Code() >= 400 && inner.Code() != http.StatusUnprocessableEntity {
				status = int(inner.Code())
			}
		}
	case errors.As(err, &notAllow):
		rw.Header().Set("Allow", strings.Join(notAllow.Allowed, ", "))
		status = http.StatusMethodNotAllowed
	case errors.As(err, &oaErr):
		status = int(oaErr.Code())
		if status >= 600 || status == http.StatusUnprocessableEntity {
			status = http.StatusBadRequest
		}
	}
	if status >= 500 {
		// Errors from the runtime itself never carry client input worth
		// echoing; keep the body generic.
		msg = http.StatusText(status)
	}
	writeJSON(rw, status, errorModel(msg))
}

// WriteError writes stamen's error body outside an operation (middleware).
func WriteError(rw http.ResponseWriter, status int, msg string) {
	writeJSON(rw, status, errorModel(msg))
}
