package chaos

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Result is what the checker found in the database after a run.
type Result struct {
	Writes int   // rows in the write log: writes the database accepted
	Final  int64 // the counter's final value (it started at 0)

	// Violations, each described.
	LostUpdates []string // a write that did not build on the previous one
	StaleWrites []string // a write whose token is below one accepted before it
	MissingAcks []string // a write a worker saw committed, not in the log
}

// Violations is the number of violations of every kind.
func (r Result) Violations() int {
	return len(r.LostUpdates) + len(r.StaleWrites) + len(r.MissingAcks)
}

type write struct {
	seq, token, old, new int64
	worker               int
}

// Check reads the counter and the write log of the database dsn names and
// holds them against the workers' acknowledgements (events of kind ack).
//
// Every accepted write increments the counter by one from the value it read,
// in one transaction with its log row. In commit order (seq), each row's old
// value must be the previous row's new value — a break is a lost update, two
// writers having read the same value — and the final value must equal the
// number of rows. Tokens must never go down in commit order: a lower token
// after a higher one is a stale write the fence let through. Every
// acknowledged write must have its row.
func Check(ctx context.Context, dsn string, events []Event) (Result, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close(ctx)
	var r Result
	if err := conn.QueryRow(ctx, "SELECT value FROM chaos_counter WHERE id = 1").Scan(&r.Final); err != nil {
		return r, err
	}
	writes, err := readWrites(ctx, conn)
	if err != nil {
		return r, err
	}
	r.Writes = len(writes)
	r.checkChain(writes)
	r.checkAcks(writes, events)
	return r, nil
}

func readWrites(ctx context.Context, conn *pgx.Conn) ([]write, error) {
	rows, err := conn.Query(ctx, "SELECT seq, worker, token, old, new FROM chaos_writes ORDER BY seq")
	if err != nil {
		return nil, err
	}
	var out []write
	for rows.Next() {
		var w write
		if err := rows.Scan(&w.seq, &w.worker, &w.token, &w.old, &w.new); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

func (r *Result) checkChain(writes []write) {
	var prev write // the counter starts at 0
	var maxToken int64
	for _, w := range writes {
		if w.old != prev.new {
			r.LostUpdates = append(r.LostUpdates, fmt.Sprintf("write %d (worker %d, token %d) read %d, but write %d (worker %d, token %d) had already made it %d",
				w.seq, w.worker, w.token, w.old, prev.seq, prev.worker, prev.token, prev.new))
		}
		if w.token < maxToken {
			r.StaleWrites = append(r.StaleWrites, fmt.Sprintf("write %d (worker %d) with token %d accepted after token %d",
				w.seq, w.worker, w.token, maxToken))
		}
		maxToken = max(maxToken, w.token)
		prev = w
	}
	if lost := int64(len(writes)) - r.Final; lost > 0 && len(r.LostUpdates) == 0 {
		r.LostUpdates = append(r.LostUpdates, fmt.Sprintf("%d writes, final value %d", len(writes), r.Final))
	}
}

func (r *Result) checkAcks(writes []write, events []Event) {
	logged := make(map[[2]int64]bool, len(writes))
	for _, w := range writes {
		logged[[2]int64{w.token, w.new}] = true
	}
	for _, ev := range events {
		if ev.Kind != "ack" {
			continue
		}
		v, _ := strconv.ParseInt(ev.Detail, 10, 64)
		if !logged[[2]int64{ev.Token, v}] {
			r.MissingAcks = append(r.MissingAcks, fmt.Sprintf("worker %d's write of %d with token %d was acknowledged but is not in the log",
				ev.Worker, v, ev.Token))
		}
	}
}
