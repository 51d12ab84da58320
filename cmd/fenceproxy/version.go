package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version and commit are stamped by make release (-ldflags "-X
// main.version=0.1.0 -X main.commit=SHA"); empty in a plain go build or go
// run. The stamped commit also covers builds Go records no VCS information
// for: a linked git worktree (golang/go#58218), a Docker build without .git.
var version, commit string

const versionUsage = `Usage: fenceproxy version

Prints the version, the commit it was built from and the Go toolchain.
A release build (make release) carries its version; go build and go run
print "devel" and the commit (go run records none).

`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", versionUsage, stdout, stderr)
	if err := parseOnlyFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	fmt.Fprint(stdout, currentBuild())
	return nil
}

// currentBuild is this binary's build: what make release stamped, and its
// build info.
func currentBuild() build {
	bi, _ := debug.ReadBuildInfo()
	return readBuild(version, commit, bi)
}

// commitLabel is the commit as a metric label or log field: the revision,
// "-dirty" after it for uncommitted changes, "unknown" when not recorded.
func (b build) commitLabel() string {
	switch {
	case b.Commit == "":
		return "unknown"
	case b.Modified:
		return b.Commit + "-dirty"
	}
	return b.Commit
}

// build is what `fenceproxy version` reports.
type build struct {
	Version  string // stamped, the module's (go install …@v1.2.3), or "devel"
	Commit   string // VCS revision, "" when not recorded
	Time     string // commit time, RFC 3339
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // toolchain, e.g. go1.26.8
	Platform string // GOOS/GOARCH
}

// readBuild combines the stamped version and commit with the binary's build
// info (nil when the binary has none); what is stamped wins.
func readBuild(stampedVersion, stampedCommit string, bi *debug.BuildInfo) build {
	b := build{Version: stampedVersion, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if bi.GoVersion != "" {
		b.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	if stampedCommit != "" { // "SHA" or "SHA-dirty", from git itself
		c := strings.TrimSuffix(stampedCommit, "-dirty")
		if c != b.Commit {
			b.Commit, b.Time = c, ""
		}
		b.Modified = c != stampedCommit
	}
	// A build from a checkout gets a pseudo-version from the toolchain;
	// only `go install module@version` (no VCS settings) names a release.
	if b.Version == "" && b.Commit == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// String is the report, one field a line.
func (b build) String() string {
	commit := "unknown (not recorded in this build: go run, -buildvcs=false, a linked git worktree, a source tree without .git)"
	if b.Commit != "" {
		commit = b.Commit
		if b.Time != "" {
			commit += " (" + b.Time + ")"
		}
		if b.Modified {
			commit += " with uncommitted changes"
		}
	}
	return fmt.Sprintf("fenceproxy %s\ncommit: %s\ngo:     %s %s\n", b.Version, commit, b.Go, b.Platform)
}
