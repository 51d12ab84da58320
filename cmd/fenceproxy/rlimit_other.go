//go:build !unix

package main

import "errors"

// fileLimit is not known outside Unix.
func fileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("RLIMIT_NOFILE: not on this system")
}
