package app

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestExportBoundedMemory exports 200,000 tasks as CSV and as JSON lines
// through the whole HTTP stack, parses every row (encoding/csv) and every
// line (encoding/json) as it streams, and holds the process's peak heap
// growth over the export under 64 MiB, as for the unpaged list.
func TestExportBoundedMemory(t *testing.T) {
	const n = 200000
	a, srv := newTaskListApp(t, n)
	fill(a.State, lifeTemplate(t), 0, n)
	for _, format := range []string{"csv", "jsonl"} {
		t.Run(format, func(t *testing.T) {
			runtime.GC()
			base := heapObjects()
			stop := peakHeap()
			resp, err := http.Get(srv.URL + "/api/tasks?format=" + format)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, "tasks."+format) {
				t.Errorf("Content-Disposition %q", cd)
			}
			rows, seen := 0, map[string]bool{}
			newest := bigID(n - 1)
			if format == "csv" {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
					t.Errorf("Content-Type %q", ct)
				}
				r := csv.NewReader(resp.Body)
				r.ReuseRecord = true
				header, err := r.Read()
				if err != nil || strings.Join(header, ",") != strings.Join(exportColumnsForTest, ",") {
					t.Fatalf("header %q, %v", header, err)
				}
				for {
					rec, err := r.Read()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("row %d: %v", rows, err)
					}
					if rows == 0 && (rec[0] != newest || rec[1] != "proj.big" || rec[2] != "SUCCESS" || rec[11] != "(1, 2)" || rec[16] != "big@h" || rec[17] != "3") {
						t.Errorf("first row %q", rec)
					}
					if rows < 1000 {
						seen[rec[0]] = true
					}
					rows++
				}
			} else {
				if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
					t.Errorf("Content-Type %q", ct)
				}
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					var task struct {
						UUID, Name, State, Worker, Result string
						Runtime                           float64
					}
					if err := json.Unmarshal(sc.Bytes(), &task); err != nil {
						t.Fatalf("line %d: %v: %s", rows, err, sc.Bytes())
					}
					if rows == 0 && (task.UUID != newest || task.Name != "proj.big" || task.Worker != "big@h" || task.Runtime != 0.19) {
						t.Errorf("first line %s", sc.Bytes())
					}
					if rows < 1000 {
						seen[task.UUID] = true
					}
					rows++
				}
				if err := sc.Err(); err != nil {
					t.Fatal(err)
				}
			}
			peak := stop()
			var growth uint64
			if peak > base {
				growth = peak - base
			}
			t.Logf("%d rows, peak heap growth %.1f MiB", rows, float64(growth)/(1<<20))
			if rows != n || len(seen) != 1000 {
				t.Errorf("%d rows (%d distinct of the first 1000), want %d", rows, len(seen), n)
			}
			if growth > 64<<20 {
				t.Errorf("peak heap growth %.1f MiB, want under 64 MiB", float64(growth)/(1<<20))
			}
		})
	}
}

// exportColumnsForTest is the CSV header the export promises.
var exportColumnsForTest = []string{
	"uuid", "name", "state", "received", "sent", "started", "rejected", "succeeded", "failed", "retried", "revoked",
	"args", "kwargs", "eta", "expires", "retries", "worker", "result", "exception", "timestamp", "runtime", "traceback",
	"exchange", "routing_key", "clock", "client", "root_id", "parent_id", "children",
}

// TestExportFilteredAndRefused exports with the list's filters and limit,
// and refuses an unknown format with a JSON 400.
func TestExportFilteredAndRefused(t *testing.T) {
	a, srv := newTaskListApp(t, 100)
	fill(a.State, lifeTemplate(t), 0, 50)
	resp, err := http.Get(srv.URL + "/api/tasks?format=csv&taskname=PROJ.BIG&limit=7&offset=2")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil || len(recs) != 8 || recs[1][0] != bigID(47) {
		t.Fatalf("filtered export: %v %q", err, recs)
	}
	resp, err = http.Get(srv.URL + "/api/tasks?format=jsonl&taskname=other")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Fatalf("empty export: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(srv.URL + "/api/tasks?format=xml")
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Error string }
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error, "format") {
		t.Fatalf("format=xml: %d %v %q", resp.StatusCode, err, e.Error)
	}
}
