//go:build unix

package main

import "syscall"

// fileLimit returns the process's RLIMIT_NOFILE, soft and hard.
func fileLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, 0, err
	}
	return uint64(r.Cur), uint64(r.Max), nil
}
