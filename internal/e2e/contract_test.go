package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	httptransport "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"

	"github.com/stamen-dev/stamen/gen/client"
	auditops "github.com/stamen-dev/stamen/gen/client/audit"
	"github.com/stamen-dev/stamen/gen/client/queues"
	"github.com/stamen-dev/stamen/gen/client/tasks"
	"github.com/stamen-dev/stamen/gen/client/workers"
	"github.com/stamen-dev/stamen/gen/models"
)

// validatable is every generated model.
type validatable interface {
	Validate(strfmt.Registry) error
}

// typedError is every generated non-2xx response with an Error payload.
type typedError interface {
	error
	Code() int
	GetPayload() *models.Error
}

// genClient is the generated client for the stamen at base.
func genClient(t *testing.T, base string) *client.Stamen {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return client.New(httptransport.New(u.Host, client.DefaultBasePath, []string{"http"}), strfmt.Default)
}

func valid(t *testing.T, op string, m validatable) {
	t.Helper()
	if err := m.Validate(strfmt.Default); err != nil {
		t.Errorf("%s: response does not match the spec: %v", op, err)
	}
}

// wantError checks that err is the spec's typed error with the status code
// and a non-empty {"error": ...} body.
func wantError(t *testing.T, op string, err error, code int) {
	t.Helper()
	var te typedError
	if !errors.As(err, &te) {
		t.Errorf("%s: want a typed %d error, got %T %v", op, code, err, err)
		return
	}
	if te.Code() != code || te.GetPayload() == nil || te.GetPayload().Error == nil || *te.GetPayload().Error == "" {
		t.Errorf("%s: got %d %v, want %d with an error message", op, te.Code(), te.GetPayload(), code)
		return
	}
	valid(t, op, te.GetPayload())
}

func ptr[T any](v T) *T { return &v }

// contractCases call each of Flower's operations through the generated client
// and check the answers, success and error, against the spec's schemas. The
// cluster's stamen has no credentials, so every call passes a nil authInfo;
// securityCases call it with credentials.
func contractCases() []suiteCase {
	return []suiteCase{
		{"contract: generated client on every operation", func(t *testing.T, c *cluster) {
			cl := genClient(t, c.api.base)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w1, w2 := c.w1.Name, c.w2.Name

			ws, err := cl.Workers.ListWorkersContext(ctx, workers.NewListWorkersParams().WithRefresh(ptr(true)), nil)
			if err != nil {
				t.Fatalf("listWorkers: %v", err)
			}
			valid(t, "listWorkers", ws.Payload)
			if _, ok := ws.Payload[w1]; !ok {
				t.Errorf("listWorkers lacks %s", w1)
			}
			_, err = cl.Workers.ListWorkersContext(ctx, workers.NewListWorkersParams().WithWorkername(ptr("nobody@nowhere")), nil)
			wantError(t, "listWorkers unknown", err, 404)

			async, err := cl.Tasks.AsyncApplyTaskContext(ctx, tasks.NewAsyncApplyTaskParams().WithTaskname("stamen.add").
				WithArgs(&models.TaskApplyRequest{Args: []any{1, 2}}), nil)
			if err != nil {
				t.Fatalf("asyncApplyTask: %v", err)
			}
			valid(t, "asyncApplyTask", async.Payload)
			id := *async.Payload.TaskID
			_, err = cl.Tasks.AsyncApplyTaskContext(ctx, tasks.NewAsyncApplyTaskParams().WithTaskname("no.such.task"), nil)
			wantError(t, "asyncApplyTask unknown", err, 404)

			applied, err := cl.Tasks.ApplyTaskContext(ctx, tasks.NewApplyTaskParams().WithTaskname("stamen.add").
				WithArgs(&models.TaskApplyRequest{Args: []any{2, 2}}), nil)
			if err != nil {
				t.Fatalf("applyTask: %v", err)
			}
			valid(t, "applyTask", applied.Payload)
			_, err = cl.Tasks.ApplyTaskContext(ctx, tasks.NewApplyTaskParams().WithTaskname("stamen.sleep").
				WithTimeout(ptr(0.5)).WithArgs(&models.TaskApplyRequest{Args: []any{3}}), nil)
			wantError(t, "applyTask bounded", err, 504)

			sent, err := cl.Tasks.SendTaskContext(ctx, tasks.NewSendTaskParams().WithTaskname("stamen.echo"), nil)
			if err != nil {
				t.Fatalf("sendTask: %v", err)
			}
			valid(t, "sendTask", sent.Payload)
			_, err = cl.Tasks.SendTaskContext(ctx, tasks.NewSendTaskParams().WithTaskname("stamen.add").
				WithArgs(&models.TaskApplyRequest{Priority: ptr(int32(1000))}), nil)
			// Exactly the spec's 400 for the out-of-range priority: a
			// network error or another status is not this rejection.
			wantError(t, "sendTask with priority 1000", err, 400)
			var prio *tasks.SendTaskBadRequest
			if errors.As(err, &prio) && (prio.Payload == nil || prio.Payload.Error == nil || !strings.Contains(*prio.Payload.Error, "priority")) {
				t.Errorf("sendTask with priority 1000: the error does not name priority: %v", prio.Payload)
			}

			res, err := cl.Tasks.GetTaskResultContext(ctx, tasks.NewGetTaskResultParams().WithTaskid(id).WithTimeout(ptr(20.0)), nil)
			if err != nil {
				t.Fatalf("getTaskResult: %v", err)
			}
			valid(t, "getTaskResult", res.Payload)

			taskInfo(t, c, id, "SUCCESS")
			info, err := cl.Tasks.GetTaskInfoContext(ctx, tasks.NewGetTaskInfoParams().WithTaskid(id), nil)
			if err != nil {
				t.Fatalf("getTaskInfo: %v", err)
			}
			valid(t, "getTaskInfo", info.Payload)
			_, err = cl.Tasks.GetTaskInfoContext(ctx, tasks.NewGetTaskInfoParams().WithTaskid("no-such-id"), nil)
			wantError(t, "getTaskInfo unknown", err, 404)

			list, err := cl.Tasks.ListTasksContext(ctx, tasks.NewListTasksParams().WithLimit(ptr(int32(10))), nil)
			if err != nil {
				t.Fatalf("listTasks: %v", err)
			}
			valid(t, "listTasks", list.Payload)
			_, err = cl.Tasks.ListTasksContext(ctx, tasks.NewListTasksParams().WithSearch(ptr("ab")), nil)
			wantError(t, "listTasks bad search", err, 400)

			types, err := cl.Tasks.ListTaskTypesContext(ctx, tasks.NewListTaskTypesParams(), nil)
			if err != nil {
				t.Fatalf("listTaskTypes: %v", err)
			}
			valid(t, "listTaskTypes", types.Payload)

			ql, err := cl.Queues.GetQueueLengthsContext(ctx, queues.NewGetQueueLengthsParams(), nil)
			if err != nil {
				t.Fatalf("getQueueLengths: %v", err)
			}
			valid(t, "getQueueLengths", ql.Payload)

			ab, err := cl.Tasks.AbortTaskContext(ctx, tasks.NewAbortTaskParams().WithTaskid(id), nil)
			if c.hasAbort {
				if err != nil {
					t.Fatalf("abortTask: %v", err)
				}
				valid(t, "abortTask", ab.Payload)
			} else {
				wantError(t, "abortTask on rpc://", err, 503)
			}

			rv, err := cl.Tasks.RevokeTaskContext(ctx, tasks.NewRevokeTaskParams().WithTaskid(id), nil)
			if err != nil {
				t.Fatalf("revokeTask: %v", err)
			}
			valid(t, "revokeTask", rv.Payload)

			to, err := cl.Tasks.SetTaskTimeoutContext(ctx, tasks.NewSetTaskTimeoutParams().WithTaskname("stamen.echo").
				WithWorkername(w1).WithSoft(ptr(30.0)).WithHard(ptr(60.0)), nil)
			if err != nil {
				t.Fatalf("setTaskTimeout: %v", err)
			}
			valid(t, "setTaskTimeout", to.Payload)
			_, err = cl.Tasks.SetTaskTimeoutContext(ctx, tasks.NewSetTaskTimeoutParams().WithTaskname("no.such.task").WithWorkername(w1), nil)
			wantError(t, "setTaskTimeout unknown task", err, 404)

			rl, err := cl.Tasks.SetTaskRateLimitContext(ctx, tasks.NewSetTaskRateLimitParams().WithTaskname("stamen.echo").
				WithWorkername(w1).WithRateLimit("100/s"), nil)
			if err != nil {
				t.Fatalf("setTaskRateLimit: %v", err)
			}
			valid(t, "setTaskRateLimit", rl.Payload)

			grow, err := cl.Workers.GrowWorkerPoolContext(ctx, workers.NewGrowWorkerPoolParams().WithWorkername(w1), nil)
			if err != nil {
				t.Fatalf("growWorkerPool: %v", err)
			}
			valid(t, "growWorkerPool", grow.Payload)
			_, err = cl.Workers.GrowWorkerPoolContext(ctx, workers.NewGrowWorkerPoolParams().WithWorkername(w2), nil)
			wantError(t, "growWorkerPool refused", err, 403)
			shrink, err := cl.Workers.ShrinkWorkerPoolContext(ctx, workers.NewShrinkWorkerPoolParams().WithWorkername(w1), nil)
			if err != nil {
				t.Fatalf("shrinkWorkerPool: %v", err)
			}
			valid(t, "shrinkWorkerPool", shrink.Payload)

			as, err := cl.Workers.AutoscaleWorkerPoolContext(ctx, workers.NewAutoscaleWorkerPoolParams().WithWorkername(w2).WithMin(2).WithMax(4), nil)
			if err != nil {
				t.Fatalf("autoscaleWorkerPool: %v", err)
			}
			valid(t, "autoscaleWorkerPool", as.Payload)

			rs, err := cl.Workers.RestartWorkerPoolContext(ctx, workers.NewRestartWorkerPoolParams().WithWorkername(w2), nil)
			if err != nil {
				t.Fatalf("restartWorkerPool: %v", err)
			}
			valid(t, "restartWorkerPool", rs.Payload)
			_, err = cl.Workers.RestartWorkerPoolContext(ctx, workers.NewRestartWorkerPoolParams().WithWorkername(w1), nil)
			wantError(t, "restartWorkerPool refused", err, 403)

			queue := "contract-" + c.kind
			add, err := cl.Workers.AddConsumerContext(ctx, workers.NewAddConsumerParams().WithWorkername(w1).WithQueue(queue), nil)
			if err != nil {
				t.Fatalf("addConsumer: %v", err)
			}
			valid(t, "addConsumer", add.Payload)
			cancelled, err := cl.Workers.CancelConsumerContext(ctx, workers.NewCancelConsumerParams().WithWorkername(w1).WithQueue(queue), nil)
			if err != nil {
				t.Fatalf("cancelConsumer: %v", err)
			}
			valid(t, "cancelConsumer", cancelled.Payload)
			_, err = cl.Workers.CancelConsumerContext(ctx, workers.NewCancelConsumerParams().WithWorkername(w1).WithQueue(""), nil)
			wantError(t, "cancelConsumer empty queue", err, 400)

			_, err = cl.Workers.ShutdownWorkerContext(ctx, workers.NewShutdownWorkerParams().WithWorkername("nobody@nowhere"), nil)
			wantError(t, "shutdownWorker unknown", err, 404)
		}},
		{"contract: generated client on purge and the audit log", func(t *testing.T, c *cluster) {
			cl := genClient(t, c.api.base)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now().Add(-time.Second)
			unknown := "contract-unknown-" + c.kind
			_, err := cl.Queues.PurgeQueueContext(ctx, queues.NewPurgeQueueParams().WithQueue(unknown), nil)
			wantError(t, "purgeQueue unknown", err, 404)
			_, err = cl.Queues.PurgeQueueContext(ctx, queues.NewPurgeQueueParams().WithQueue("a b"), nil)
			wantError(t, "purgeQueue invalid name", err, 400)
			p, err := cl.Queues.PurgeQueueContext(ctx, queues.NewPurgeQueueParams().WithQueue(unknown).WithForce(ptr(true)), nil)
			if err != nil {
				t.Fatalf("purgeQueue forced: %v", err)
			}
			valid(t, "purgeQueue", p.Payload)
			if *p.Payload.Queue != unknown || *p.Payload.Purged != 0 {
				t.Errorf("purgeQueue forced: %+v", p.Payload)
			}

			log, err := cl.Audit.ListAuditContext(ctx, auditops.NewListAuditParams().WithOperation(ptr("purgeQueue")).
				WithSince(ptr(start.UTC().Format(time.RFC3339Nano))).WithLimit(ptr(int32(10))), nil)
			if err != nil {
				t.Fatalf("listAudit: %v", err)
			}
			valid(t, "listAudit", log.Payload)
			// Newest first: the forced purge, then the two refused ones.
			var statuses []int32
			for _, r := range log.Payload.Records {
				if *r.User != "anonymous" || *r.Operation != "purgeQueue" {
					t.Errorf("listAudit record: %+v", r)
				}
				statuses = append(statuses, *r.Status)
			}
			if fmt.Sprint(statuses) != "[200 400 404]" {
				t.Errorf("listAudit statuses %v, want [200 400 404]", statuses)
			}
			_, err = cl.Audit.ListAuditContext(ctx, auditops.NewListAuditParams().WithSince(ptr("yesterday")), nil)
			wantError(t, "listAudit bad since", err, 400)
		}},
	}
}
