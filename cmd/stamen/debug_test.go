package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDebugAddrFlag: --debug_addr (both spellings) falls back to
// STAMEN_DEBUG_ADDR then FLOWER_DEBUG_ADDR as every flag does, is empty
// (no profiling listener) by default, and wants a host:port.
func TestDebugAddrFlag(t *testing.T) {
	for _, k := range []string{"STAMEN_DEBUG_ADDR", "FLOWER_DEBUG_ADDR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for _, tc := range []struct {
		name    string
		env     [][2]string
		args    []string
		want    string
		wantErr string
	}{
		{name: "off by default", want: ""},
		{name: "--debug_addr", args: []string{"--debug_addr", "127.0.0.1:6060"}, want: "127.0.0.1:6060"},
		{name: "--debug-addr", args: []string{"--debug-addr=localhost:6061"}, want: "localhost:6061"},
		{name: "STAMEN_DEBUG_ADDR", env: [][2]string{{"STAMEN_DEBUG_ADDR", "127.0.0.1:6062"}}, want: "127.0.0.1:6062"},
		{name: "FLOWER_DEBUG_ADDR", env: [][2]string{{"FLOWER_DEBUG_ADDR", "[::1]:6063"}}, want: "[::1]:6063"},
		{name: "STAMEN_ wins over FLOWER_", env: [][2]string{{"STAMEN_DEBUG_ADDR", "127.0.0.1:6064"}, {"FLOWER_DEBUG_ADDR", "127.0.0.1:1"}},
			want: "127.0.0.1:6064"},
		{name: "the flag wins over the environment", env: [][2]string{{"STAMEN_DEBUG_ADDR", "127.0.0.1:1"}},
			args: []string{"--debug_addr", "127.0.0.1:6065"}, want: "127.0.0.1:6065"},
		{name: "no port", args: []string{"--debug_addr", "6060"}, wantErr: "--debug_addr: want host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				t.Setenv(kv[0], kv[1])
			}
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("error: %v", err)
			case o.debugAddr != tc.want:
				t.Errorf("debugAddr %q, want %q", o.debugAddr, tc.want)
			}
		})
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode, body
}

func contains(s string) func([]byte) error {
	return func(b []byte) error {
		if !bytes.Contains(b, []byte(s)) {
			return fmt.Errorf("want %q in %.300q", s, b)
		}
		return nil
	}
}

func lacks(s string) func([]byte) error {
	return func(b []byte) error {
		if bytes.Contains(b, []byte(s)) {
			return fmt.Errorf("want no %q in %.300q", s, b)
		}
		return nil
	}
}

// gzipped checks a CPU profile: gzip (magic 1f 8b) of a non-empty protobuf.
func gzipped(b []byte) error {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return fmt.Errorf("no gzip magic: %.32q", b)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("gunzip: %w", err)
	}
	if len(raw) == 0 {
		return errors.New("empty profile")
	}
	return nil
}

// TestDebugAddr runs the binary with --debug_addr on a free loopback port:
// the profiling endpoints answer there, cmdline does not (it would show the
// broker's password), the API's port serves none of them, and the process
// still stops cleanly on SIGTERM. Then a non-loopback --debug_addr is
// served with a warning, and a busy one stops stamen at start.
func TestDebugAddr(t *testing.T) {
	bin := buildBinary(t)

	t.Run("loopback", func(t *testing.T) {
		debug := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		api, logs, stop := runStamen(t, bin, "--debug_addr", strings.TrimPrefix(debug, "http://"))
		// In order: block looks for the wait of profile, which came before.
		for _, tc := range []struct {
			name   string
			url    string
			status int
			checks []func([]byte) error
		}{
			{"index", debug + "/debug/pprof/", 200, []func([]byte) error{contains("Types of profiles available")}},
			{"heap", debug + "/debug/pprof/heap?debug=1", 200, []func([]byte) error{contains("heap profile:")}},
			{"allocs", debug + "/debug/pprof/allocs?debug=1", 200, []func([]byte) error{contains("heap profile:")}},
			{"goroutine", debug + "/debug/pprof/goroutine?debug=1", 200, []func([]byte) error{contains("goroutine profile: total")}},
			{"threadcreate", debug + "/debug/pprof/threadcreate?debug=1", 200, []func([]byte) error{contains("threadcreate profile: total")}},
			{"profile", debug + "/debug/pprof/profile?seconds=1", 200, []func([]byte) error{gzipped}},
			// Sampled only because --debug_addr set the rates: profile's
			// one-second wait is a blocking event, one mutex event in 100.
			{"block", debug + "/debug/pprof/block?debug=1", 200, []func([]byte) error{contains("net/http/pprof.Profile")}},
			{"mutex", debug + "/debug/pprof/mutex?debug=1", 200, []func([]byte) error{contains("sampling period=100\n")}},
			{"symbol", debug + "/debug/pprof/symbol", 200, []func([]byte) error{contains("num_symbols: 1")}},
			{"trace", debug + "/debug/pprof/trace?seconds=0.2", 200, []func([]byte) error{contains("go 1.")}},
			{"cmdline is not served", debug + "/debug/pprof/cmdline", 404, []func([]byte) error{lacks("--debug_addr"), lacks(bin)}},
			{"nothing outside /debug/pprof/", debug + "/api/workers", 404, nil},
			{"not on the API's port: index", api + "/debug/pprof/", 404, []func([]byte) error{lacks("profiles")}},
			{"not on the API's port: heap", api + "/debug/pprof/heap?debug=1", 404, []func([]byte) error{lacks("heap profile")}},
			{"not on the API's port: cmdline", api + "/debug/pprof/cmdline", 404, []func([]byte) error{lacks("--debug_addr")}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := get(t, tc.url)
				if status != tc.status {
					t.Errorf("GET %s: %d, want %d: %.300q", tc.url, status, tc.status, body)
				}
				for _, check := range tc.checks {
					if err := check(body); err != nil {
						t.Errorf("GET %s: %v", tc.url, err)
					}
				}
			})
		}
		if err := stop(); err != nil {
			t.Errorf("exit: %v\n%s", err, logs.String())
		}
		l := logs.String()
		if !strings.Contains(l, "profiling endpoints listening") {
			t.Errorf("the log does not say where the profiling endpoints are:\n%s", l)
		}
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("the log holds a warning or an error on loopback:\n%s", l)
		}
	})

	t.Run("beyond loopback warns", func(t *testing.T) {
		port := freePort(t)
		_, logs, stop := runStamen(t, bin, "--debug-addr", fmt.Sprintf("0.0.0.0:%d", port))
		status, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", port))
		if status != 200 || !bytes.Contains(body, []byte("heap profile:")) {
			t.Errorf("heap: %d %.300q", status, body)
		}
		if err := stop(); err != nil {
			t.Errorf("exit: %v\n%s", err, logs.String())
		}
		if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "no authentication") {
			t.Errorf("no warning about the unauthenticated endpoints:\n%s", l)
		}
	})

	t.Run("busy address stops the start", func(t *testing.T) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--port", fmt.Sprint(freePort(t)), "--debug_addr", busy.Addr().String(),
			"--embedded_broker_address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			"--db", filepath.Join(t.TempDir(), "stamen.db"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1; stderr: %s", err, stderr.String())
		}
		if s := stderr.String(); !strings.Contains(s, "cannot start the profiling endpoints") ||
			!strings.Contains(s, busy.Addr().String()) || !strings.Contains(s, "address already in use") {
			t.Errorf("stderr does not say why: %s", s)
		}
	})
}
