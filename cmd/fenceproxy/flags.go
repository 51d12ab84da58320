package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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

// printUsage writes the usage text and the flags' defaults to w.
func (fs *flagSet) printUsage(w io.Writer) {
	fs.SetOutput(w)
	fmt.Fprint(w, fs.usage)
	fs.PrintDefaults()
	fs.SetOutput(fs.stderr)
}

// usageError prints "fenceproxy NAME: message" and the usage to stderr and
// returns errUsageShown (exit 2).
func (fs *flagSet) usageError(format string, args ...any) error {
	fmt.Fprintf(fs.stderr, "fenceproxy %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.printUsage(fs.stderr)
	return errUsageShown
}

// parseFlags parses args up to the first positional argument, which it
// leaves in fs.Args(). --help returns errHelp; a bad flag returns
// errUsageShown.
func parseFlags(fs *flagSet, args []string) error {
	err := fs.Parse(args)
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
