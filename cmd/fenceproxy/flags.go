package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// errUsageShown means the usage text was already printed; exit 2 quietly.
var errUsageShown = errors.New("usage shown")

// errHelp means --help printed the usage; callers treat it as success.
var errHelp = errors.New("help shown")

// flagSet is one command's flags and usage text. --help prints the usage to
// stdout; a bad flag or argument prints what is wrong and the usage to
// stderr, and the command exits 2.
type flagSet struct {
	*flag.FlagSet
	usage  string
	stdout io.Writer
	stderr io.Writer
}

// newFlagSet returns the flag set of the command name ("serve", "lock run").
func newFlagSet(name, usage string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), usage: usage, stdout: stdout, stderr: stderr}
	fs.SetOutput(stderr)
	fs.Usage = func() {} // parseFlags prints it, to the stream that fits
	return fs
}

// printUsage writes the usage text and the flags' defaults to w, each flag
// written --name as the usage lines write it (the flag package prints
// -name; both forms parse).
func (fs *flagSet) printUsage(w io.Writer) {
	var defaults bytes.Buffer
	fs.SetOutput(&defaults)
	fs.PrintDefaults()
	fs.SetOutput(fs.stderr)
	fmt.Fprint(w, fs.usage)
	for _, line := range strings.SplitAfter(defaults.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			line = "  --" + line[3:]
		}
		fmt.Fprint(w, line)
	}
}

// usageError prints "fenceproxy NAME: message" and the usage to stderr and
// returns errUsageShown (exit 2).
func (fs *flagSet) usageError(format string, args ...any) error {
	fmt.Fprintf(fs.stderr, "fenceproxy %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.printUsage(fs.stderr)
	return errUsageShown
}

// parseFlags parses args, flags and positional arguments in any order, and
// leaves the positional ones in fs.Args(). Everything after "--" is
// positional, and so is everything from the (verbatim+1)th positional on
// when verbatim > 0 (lock run: NAME, then the child's command line, whose
// flags are the child's). --help returns errHelp; a bad flag returns
// errUsageShown.
func parseFlags(fs *flagSet, args []string) error {
	return parseArgs(fs, args, 0)
}

func parseArgs(fs *flagSet, args []string, verbatim int) error {
	flags, positional := splitArgs(fs.FlagSet, args, verbatim)
	err := fs.Parse(append(flags, append([]string{"--"}, positional...)...))
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.printUsage(fs.stdout)
		return errHelp
	case err != nil: // the flag package printed what is wrong
		fmt.Fprintln(fs.stderr)
		fs.printUsage(fs.stderr)
		return errUsageShown
	}
	return nil
}

// isNumber reports whether a is a negative number (-5): an argument, since
// no flag's name starts with a digit, for the command to judge.
func isNumber(a string) bool {
	_, err := strconv.ParseFloat(a, 64)
	return err == nil
}

// splitArgs separates args into flags (with their values) and positional
// arguments, in order. A flag's value is the next argument unless the flag
// is boolean or written --name=value; an unknown flag is kept among the
// flags for the flag package to report.
func splitArgs(fs *flag.FlagSet, args []string, verbatim int) (flags, positional []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(positional, args[i+1:]...)
		case len(a) < 2 || a[0] != '-' || isNumber(a):
			if verbatim > 0 && len(positional) == verbatim {
				return flags, append(positional, args[i:]...)
			}
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, positional
}

// parseOnlyFlags is parseFlags for a command that takes no positional
// arguments: one is a usage error, never ignored.
func parseOnlyFlags(fs *flagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fs.usageError("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
