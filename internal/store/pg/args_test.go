package pg

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// randomTasks are n tasks of the fleet bench's shape with uuid4-shaped
// random ids, completed, a tenth failed.
func randomTasks(n int, r *rand.Rand) []taskrec.Task {
	tasks := make([]taskrec.Task, n)
	for i := range tasks {
		at := 1.7e9 + float64(i)/1000
		t := taskrec.Task{
			UUID: fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff,
				0x8000|r.Uint32()&0x3fff, r.Uint64()&0xffffffffffff),
			Name:  []string{"bench.add", "bench.mul", "bench.div"}[i%3],
			State: "SUCCESS", Received: at, Started: at + 0.001, Succeeded: at + 0.002, Runtime: 0.001,
			Args: "(1, 2)", Kwargs: "{}", Result: "3", Worker: fmt.Sprintf("bench@w%d", i%4),
			Timestamp: at + 0.002, Clock: int64(3*i + 2), RoutingKey: "celery",
			Set: taskrec.FieldName | taskrec.FieldReceived | taskrec.FieldStarted | taskrec.FieldSucceeded |
				taskrec.FieldRuntime | taskrec.FieldArgs | taskrec.FieldKwargs | taskrec.FieldResult |
				taskrec.FieldRetries | taskrec.FieldWorker | taskrec.FieldTimestamp | taskrec.FieldRoutingKey,
		}
		if i%10 == 0 {
			t.State, t.Failed, t.Exception, t.Traceback = "FAILURE", t.Timestamp, "ValueError('bad input')", "Traceback …"
			t.Set = t.Set&^(taskrec.FieldSucceeded|taskrec.FieldRuntime|taskrec.FieldResult) |
				taskrec.FieldFailed | taskrec.FieldException | taskrec.FieldTraceback
		}
		tasks[i] = t
	}
	return tasks
}

func TestByIDKeepsATasksRecordsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tasks := randomTasks(2000, r)
	// Every fifth task comes again, later, with a record of its own.
	for i := 0; i < 2000; i += 5 {
		again := tasks[i]
		again.Clock = int64(10_000 + i)
		tasks = append(tasks, again)
	}
	r.Shuffle(2000, func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	sorted := byID(tasks)
	if len(sorted) != len(tasks) {
		t.Fatalf("%d records sorted, %d given", len(sorted), len(tasks))
	}
	seen := map[int64]bool{}
	for i, task := range sorted {
		seen[task.Clock] = true
		if i == 0 {
			continue
		}
		prev := sorted[i-1]
		if prev.UUID > task.UUID {
			t.Fatalf("record %d (%s) after %s", i, task.UUID, prev.UUID)
		}
		if prev.UUID == task.UUID && prev.Clock > task.Clock {
			t.Fatalf("task %s's records out of the order they came: clock %d before %d", task.UUID, prev.Clock, task.Clock)
		}
	}
	if len(seen) != len(tasks) {
		t.Fatalf("%d distinct records sorted, %d given", len(seen), len(tasks))
	}
}

// BenchmarkWriteArgs is what a replica's CPU does for a chunk of 5,000
// records before PostgreSQL sees them: sort them by id, lay them out as
// the upsert's arrays and encode those as pgx sends them. ns/op is a chunk.
func BenchmarkWriteArgs(b *testing.B) {
	tasks := randomTasks(5000, rand.New(rand.NewPCG(3, 4)))
	m := pgtype.NewMap()
	oids := make([]uint32, len(taskTypes), len(taskTypes)+1)
	for i, typ := range taskTypes {
		oids[i] = map[string]uint32{"text": pgtype.TextArrayOID, "float8": pgtype.Float8ArrayOID, "int8": pgtype.Int8ArrayOID}[typ]
	}
	oids = append(oids, pgtype.TextArrayOID) // the ids' grams
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		for i, a := range upsertArgs(byID(tasks)) {
			var err error
			if buf, err = m.Encode(oids[i], pgtype.BinaryFormatCode, a, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tasks)), "ns/task")
}
