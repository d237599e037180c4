package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// envExtra holds the variables an option is read from after STAMEN_<NAME>
// and FLOWER_<NAME>, by the option's name: Celery's own, so that a
// worker's environment configures stamen too.
var envExtra = map[string][]string{
	"broker":         {"CELERY_BROKER_URL"},
	"result_backend": {"CELERY_RESULT_BACKEND"},
}

// option is one option of the command line as --help and
// docs/configuration.md show it: every spelling registered for it, the
// variables it is read from, its kind of value, its default and what it
// does.
type option struct {
	// Names are the spellings, Flower's (with underscores) first.
	Names []string
	Env   []string
	// Type is the kind of value ("string", "duration"...), empty for a
	// switch, which may be given alone.
	Type    string
	Default string
	Usage   string
}

// Name is the option's Flower spelling.
func (o option) Name() string { return o.Names[0] }

// flagOptions describes fs's flags as options: the flags registered under
// both spellings of a name (max_tasks and max-tasks) are one option, in
// the order of their Flower spelling.
func flagOptions(fs *flag.FlagSet) []option {
	byName := map[string]*option{}
	var order []string
	fs.VisitAll(func(f *flag.Flag) {
		name := strings.ReplaceAll(f.Name, "-", "_")
		if o, ok := byName[name]; ok {
			o.Names = append(o.Names, f.Name)
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case *redactedString, *hiddenString:
			typ = "string"
		case *bucketsFlag:
			typ = "seconds,..."
		}
		env := []string{"STAMEN_" + strings.ToUpper(name), "FLOWER_" + strings.ToUpper(name)}
		byName[name] = &option{Names: []string{f.Name}, Env: append(env, envExtra[name]...),
			Type: typ, Default: f.DefValue, Usage: usage}
		order = append(order, name)
	})
	slices.Sort(order)
	out := make([]option, len(order))
	for i, name := range order {
		o := *byName[name]
		// Flower's spelling first, then the others.
		slices.SortFunc(o.Names, func(a, b string) int {
			if (a == name) != (b == name) {
				if a == name {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		out[i] = o
	}
	return out
}

// printUsage is --help: each option once, with its other spellings, its
// variables and its default.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: stamen [--option=value ...]

Each option is also read from its variables, STAMEN_<NAME> first; a flag
given overrides them. Names take _ or -: --max_tasks and --max-tasks are
one option. The full reference: docs/configuration.md.

`)
	for _, o := range flagOptions(fs) {
		fmt.Fprintf(w, "  --%s", strings.Join(o.Names, ", --"))
		if o.Type != "" {
			fmt.Fprintf(w, " %s", o.Type)
		}
		fmt.Fprintf(w, "\n      %s", o.Usage)
		if o.Default != "" {
			fmt.Fprintf(w, " (default %s)", o.Default)
		}
		fmt.Fprintf(w, "\n      env: %s\n", strings.Join(o.Env, ", "))
	}
}
