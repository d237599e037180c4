package history

import (
	"fmt"
	"testing"
)

// TestMergeBatches: records of the same task keep the newer; records of
// tasks evicted since go; workers and types are the union, but for what
// the newer batch forgot, and what either forgot is still forgotten unless
// the newer batch keeps it.
func TestMergeBatches(t *testing.T) {
	older := Batch{FirstSeq: 1, Tasks: []Task{{Seq: 1, Data: []byte("old1")}, {Seq: 3, Data: []byte("old3")}, {Seq: 5, Data: []byte("old5")}},
		Workers: map[string][]byte{"a": []byte("a-old"), "b": []byte("b-old"), "c": []byte("c-old")}, ForgottenWorkers: []string{"d", "e"},
		Types: []string{"t1", "t3"}, ForgottenTypes: []string{"t4", "t5"}}
	newer := Batch{FirstSeq: 2, Tasks: []Task{{Seq: 3, Data: []byte("new3")}, {Seq: 4, Data: []byte("new4")}},
		Workers: map[string][]byte{"b": []byte("b-new"), "d": []byte("d-new")}, ForgottenWorkers: []string{"c", "e"},
		Types: []string{"t2", "t4"}, ForgottenTypes: []string{"t3"}}
	got := mergeBatches(older, newer)
	var seqs []string
	for _, r := range got.Tasks {
		seqs = append(seqs, fmt.Sprintf("%d=%s", r.Seq, r.Data))
	}
	if want := "[3=new3 4=new4 5=old5]"; fmt.Sprint(seqs) != want {
		t.Errorf("tasks %v, want %s", seqs, want)
	}
	workers := map[string]string{}
	for w, e := range got.Workers {
		workers[w] = string(e)
	}
	for _, c := range []struct{ what, got, want string }{
		{"first seq", fmt.Sprint(got.FirstSeq), "2"},
		{"workers", fmt.Sprint(workers), "map[a:a-old b:b-new d:d-new]"},
		{"forgotten workers", fmt.Sprint(got.ForgottenWorkers), "[d e c]"},
		{"types", fmt.Sprint(got.Types), "[t2 t4 t1]"},
		{"forgotten types", fmt.Sprint(got.ForgottenTypes), "[t5 t3]"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.what, c.got, c.want)
		}
	}
}

// TestMergeKeep: for PostgreSQL the buffer keeps the records of tasks
// evicted from the hot set (they are history) and newer records win; a
// buffer kept after a failed write is trimmed to max records, the oldest
// dropped and counted.
func TestMergeKeep(t *testing.T) {
	older := Batch{FirstSeq: 1, Tasks: []Task{{Seq: 1, Data: []byte("old1")}, {Seq: 3, Data: []byte("old3")}, {Seq: 5, Data: []byte("old5")}},
		ForgottenWorkers: []string{"gone"}}
	newer := Batch{FirstSeq: 4, Tasks: []Task{{Seq: 3, Data: []byte("new3")}, {Seq: 6, Data: []byte("new6")}}}
	merged := mergeKeep(older, newer)
	if merged.FirstSeq != 4 || fmt.Sprint(merged.ForgottenWorkers) != "[gone]" {
		t.Errorf("merged %+v", merged)
	}
	for _, c := range []struct {
		max  int
		want string
		lost int
	}{
		{10, "[1=old1 3=new3 5=old5 6=new6]", 0},
		{3, "[3=new3 5=old5 6=new6]", 1},
		{1, "[6=new6]", 3},
	} {
		got, lost := trimOldest(merged, c.max)
		var seqs []string
		for _, r := range got.Tasks {
			seqs = append(seqs, fmt.Sprintf("%d=%s", r.Seq, r.Data))
		}
		if fmt.Sprint(seqs) != c.want || lost != c.lost {
			t.Errorf("max %d: %v lost %d, want %s lost %d", c.max, seqs, lost, c.want, c.lost)
		}
	}
}
