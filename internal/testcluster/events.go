package testcluster

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// SucceededTaskEnvelope is what a worker publishes on the Redis
// /<db>.celeryev/task.multi channel for a task that was received, started
// and succeeded: one kombu envelope holding a list of three events. Tests
// and benchmarks publish it to feed stamen without running a worker.
func SucceededTaskEnvelope(id, name, worker string, clock int) []byte {
	now := float64(time.Now().UnixMicro()) / 1e6
	common := func(typ string) map[string]any {
		return map[string]any{"type": typ, "uuid": id, "hostname": worker, "timestamp": now, "clock": clock, "pid": 1, "utcoffset": 0}
	}
	received := common("task-received")
	received["name"], received["args"], received["kwargs"], received["retries"] = name, "(1, 2)", "{}", 0
	succeeded := common("task-succeeded")
	succeeded["result"], succeeded["runtime"] = "3", 0.001
	body, _ := json.Marshal([]map[string]any{received, common("task-started"), succeeded})
	env, _ := json.Marshal(map[string]any{
		"body": base64.StdEncoding.EncodeToString(body), "content-encoding": "utf-8", "content-type": "application/json",
		"headers": map[string]any{"hostname": worker},
		"properties": map[string]any{
			"delivery_mode": 1, "delivery_info": map[string]any{"exchange": "celeryev", "routing_key": "task.multi"},
			"priority": 0, "body_encoding": "base64", "delivery_tag": id,
		},
	})
	return env
}
