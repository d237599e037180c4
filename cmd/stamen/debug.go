package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/stamen-dev/stamen/internal/app"
)

// The sampling rates set for --debug_addr only: without them the block and
// mutex profiles stay empty. One blocking event is sampled per 10 µs spent
// blocked and one mutex contention event in 100, which keeps their cost
// small enough to leave on in a running service while still showing where
// goroutines wait.
const (
	debugBlockProfileRate     = 10000 // ns
	debugMutexProfileFraction = 100
)

// The profiling server's bounds, as the API's against slow clients. Its
// write bound is for the whole answer; /debug/pprof/profile and
// /debug/pprof/trace extend their own deadline by the ?seconds= asked
// (net/http/pprof adds them to the server's WriteTimeout), so a 60 s CPU
// profile gets 60 s plus this.
const debugWriteTimeout = 30 * time.Second

// debugProfiles are the runtime's named profiles served under
// /debug/pprof/<name>.
var debugProfiles = []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"}

// debugHandler serves net/http/pprof's endpoints on a mux of its own,
// never http.DefaultServeMux (net/http/pprof is not imported for its side
// effect). /debug/pprof/cmdline is left out on purpose: stamen's command
// line may hold broker or database URLs with their passwords. The index
// page still links to it, and that link answers 404.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/{$}", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	for _, name := range debugProfiles {
		mux.Handle("/debug/pprof/"+name, pprof.Handler(name))
	}
	return mux
}

// startDebug binds addr and serves the profiling endpoints there until the
// returned server is closed. They have no authentication: an address
// beyond loopback is served, with a warning. Only then are the block and
// mutex profiles' rates set.
func startDebug(addr string, log *slog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --debug_addr %s: %w", addr, err)
	}
	bound := ln.Addr().String()
	if host, _, err := net.SplitHostPort(bound); err != nil || !app.IsLoopback(host) {
		log.Warn("the profiling endpoints have no authentication and listen beyond loopback; prefer --debug_addr 127.0.0.1:<port>",
			slog.String("debug_addr", bound))
	}
	runtime.SetBlockProfileRate(debugBlockProfileRate)
	runtime.SetMutexProfileFraction(debugMutexProfileFraction)
	srv := newServer(debugHandler(), log)
	srv.WriteTimeout = debugWriteTimeout
	log.Info("profiling endpoints listening", slog.String("address", "http://"+bound+"/debug/pprof/"))
	go func() {
		// Profiling is a side job: stamen keeps serving the API if it stops.
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiling server stopped", slog.Any("err", err))
		}
	}()
	return srv, nil
}
