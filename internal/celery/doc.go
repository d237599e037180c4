// Package celery speaks Celery's wire protocol (task protocol v2, events,
// pidbox remote control, result documents) as plain data: it encodes and
// decodes messages and knows nothing of HTTP or of any particular broker.
package celery
