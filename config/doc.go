// Package config is fenceproxy's configuration: the YAML file format, the
// FENCEPROXY_* environment overrides, defaults and validation.
//
// It owns parsing and checking only: Load reads the file it is given and
// does no other I/O; there is no package-level state. Precedence, applied by
// the caller in this order, is defaults < file < environment < flags.
//
// Errors name the file and line of the offending key (an unknown key is an
// error, not ignored) or the field that fails validation.
package config
