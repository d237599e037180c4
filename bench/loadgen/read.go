package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// reads is what a closed-loop read of one path measured: every request's
// latency, sorted, and how long the read ran.
type reads struct {
	latencies []time.Duration
	took      time.Duration
	failed    int
	statuses  map[int]int
	firstErr  error
}

// quantile is the q-quantile of the latencies, nearest rank.
func (r *reads) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(q*float64(len(r.latencies))+0.5) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

func (r *reads) perSecond() float64 { return float64(len(r.latencies)) / r.took.Seconds() }

// clientReads is what one client of a closed-loop read recorded.
type clientReads struct {
	lat      []time.Duration
	failed   int
	statuses map[int]int
	err      error
}

func (p *clientReads) fail(err error) {
	p.failed++
	p.err = firstOf(p.err, err)
}

// closedLoop runs read on clients goroutines, each keeping one request in
// flight, for d or, when d is 0, until stop is done, closes started (when
// not nil) once they run, and gathers what they recorded.
func closedLoop(stop context.Context, clients int, d time.Duration, started chan struct{}, read func(stop context.Context, p *clientReads)) *reads {
	if d > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(stop, d)
		defer cancel()
	}
	parts := make([]clientReads, clients)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range parts {
		p := &parts[i]
		p.lat = make([]time.Duration, 0, 1<<16)
		p.statuses = map[int]int{}
		wg.Go(func() { read(stop, p) })
	}
	if started != nil {
		close(started)
	}
	wg.Wait()
	r := &reads{took: time.Since(began), statuses: map[int]int{}}
	for _, p := range parts {
		r.latencies = append(r.latencies, p.lat...)
		r.failed += p.failed
		for s, n := range p.statuses {
			r.statuses[s] += n
		}
		r.firstErr = firstOf(r.firstErr, p.err)
	}
	slices.Sort(r.latencies)
	return r
}

// readClosedLoop reads url with closedLoop, each client on its own
// kept-alive connection of net/http's client, and each answer's body read
// to its end into a reused buffer and dropped.
//
// It replaces vegeta's attacker, which keeps every answer's body (a task
// list is about 80 KB) and several allocations per result: with stamen and
// the driver on the same two cores, the driver's own CPU is part of what a
// tail measures. Under vegeta the first reads of a run, while the driver's
// heap first grew past the events it had generated, cost the driver 1.21
// CPUs, which is why the task list read slower at 10,000 tasks than at
// 100,000 (bench/RESULTS.md).
func readClosedLoop(stop context.Context, url string, clients int, d time.Duration, started chan struct{}) *reads {
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return closedLoop(stop, clients, d, started, func(stop context.Context, p *clientReads) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			p.fail(err)
			return
		}
		buf := make([]byte, 64<<10)
		for stop.Err() == nil {
			t0 := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				if stop.Err() == nil {
					p.fail(err)
				}
				continue
			}
			err = drain(resp.Body, buf)
			resp.Body.Close()
			p.lat = append(p.lat, time.Since(t0))
			p.statuses[resp.StatusCode]++
			if err != nil || resp.StatusCode != http.StatusOK {
				p.fail(fmt.Errorf("GET %s: %s: %v", url, resp.Status, err))
			}
		}
	})
}

// drain reads r to its end into buf, over and over.
func drain(r io.Reader, buf []byte) error {
	for {
		_, err := r.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// firstOf is the first of two errors that is not nil.
func firstOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
