package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Flower's options that stamen has no use for. A Flower command line or
// environment that gives them runs unchanged: each one given is named in a
// log line at start (never its value), and otherwise ignored.
var flowerIgnored = []struct {
	name string
	// boolean options may be given alone (--natural_time), as Tornado
	// allows.
	boolean bool
	why     string
}{
	{name: "auto_refresh", boolean: true, why: "it drives Flower's web UI, and stamen serves the API only"},
	{name: "natural_time", boolean: true, why: "it drives Flower's web UI, and stamen serves the API only"},
	{name: "tasks_columns", why: "it drives Flower's web UI, and stamen serves the API only"},
	{name: "broker_api", why: "stamen reads RabbitMQ queue lengths through the broker, without the management plugin"},
}

// Flower's options that stamen cannot honour and must not ignore: each
// stops stamen at start, saying what to do instead.
var flowerRefused = []struct{ name, why string }{
	{"conf", "stamen does not read Flower's Python configuration file: give its options as flags or FLOWER_<NAME> variables"},
}

// anyValue is a flag that takes any value and keeps only whether it was
// given: the value (broker_api's URL holds a password) is never kept, so
// it cannot be shown.
type anyValue struct {
	given   *bool
	boolean bool
}

func (v anyValue) String() string   { return "" }
func (v anyValue) Set(string) error { *v.given = true; return nil }
func (v anyValue) IsBoolFlag() bool { return v.boolean }

// registerFlowerOnly adds the ignored and refused options to fs and
// returns a function that, once fs is parsed, names the ignored options
// given (by flag or environment) and errs on a refused one.
func registerFlowerOnly(fs *flag.FlagSet, both func(string, func(string))) func() ([]string, error) {
	given := map[string]*bool{}
	add := func(name string, boolean bool, usage string) {
		g := new(bool)
		given[name] = g
		both(name, func(n string) { fs.Var(anyValue{given: g, boolean: boolean}, n, usage) })
	}
	for _, o := range flowerIgnored {
		add(o.name, o.boolean, "Flower's option, ignored: "+o.why)
	}
	for _, o := range flowerRefused {
		add(o.name, false, "Flower's option, refused: "+o.why)
	}
	isGiven := func(name string) bool {
		k, v := env(strings.ToUpper(name))
		return *given[name] || (k != "" && v != "")
	}
	return func() ([]string, error) {
		var errs []error
		for _, o := range flowerRefused {
			if isGiven(o.name) {
				errs = append(errs, fmt.Errorf("--%s: %s", o.name, o.why))
			}
		}
		var ignored []string
		for _, o := range flowerIgnored {
			if isGiven(o.name) {
				ignored = append(ignored, o.name)
			}
		}
		return ignored, errors.Join(errs...)
	}
}

// ignoredWhy is why Flower's option name is ignored.
func ignoredWhy(name string) string {
	for _, o := range flowerIgnored {
		if o.name == name {
			return o.why
		}
	}
	return ""
}
