package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger returns serve's logger: format (text or json) on w, at the
// level in v, which it sets to level (debug, info, warn, error); setting v
// later changes the logger's level.
func newLogger(v *slog.LevelVar, level, format string, w io.Writer) (*slog.Logger, error) {
	if err := setLevel(v, level); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: v}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// setLevel sets v to level: debug, info, warn or error.
func setLevel(v *slog.LevelVar, level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	v.Set(l)
	return nil
}

// logStart writes the start-up line: which build, which config file, and
// the file-descriptor limit (each client session holds two descriptors).
func logStart(log *slog.Logger, cfgPath string) {
	b := currentBuild()
	if cfgPath == "" {
		cfgPath = "(none: defaults, environment and flags)"
	}
	soft, hard, err := fileLimit()
	attrs := []any{"version", b.Version, "commit", b.commitLabel(), "goversion", b.Go, "config", cfgPath}
	if err != nil {
		attrs = append(attrs, "nofile_err", err.Error())
	} else {
		attrs = append(attrs, "nofile_soft", soft, "nofile_hard", hard)
	}
	log.Info("fenceproxy starting", attrs...)
}
