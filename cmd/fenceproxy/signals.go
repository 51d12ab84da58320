package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// forcedExitStatus is the exit status after a second SIGINT or SIGTERM
// during a graceful shutdown: 128 + the signal's number, as a shell
// reports a process the signal ended (130 for SIGINT, 143 for SIGTERM).
func forcedExitStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// exitOnSecondSignal watches for SIGINT and SIGTERM from now on (the first
// one, which started the graceful shutdown, has been taken by the caller)
// and on the next calls exit at once with forcedExitStatus: an operator
// who presses Ctrl-C twice, or a supervisor that sends SIGTERM again, means
// it. Sessions still open are cut; their transactions roll back. The
// returned function stops watching; the watching goroutine ends with it.
func exitOnSecondSignal(log *slog.Logger, exit func(int)) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			code := forcedExitStatus(sig)
			log.Warn("second signal during shutdown: exiting at once, open sessions are cut", "signal", sig.String(), "exit_status", code)
			exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
