package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report sums up a run: operations, faults, hand-off gaps and loss reports.
type Report struct {
	Counts map[string]int // events by kind: grant, ack, refused, dberr, lost, …
	Faults map[string]int // faults by kind

	// MaxGap is, per fault kind, the longest gap between two successive
	// grants (of any workers) that ended after a fault of that kind and
	// before the next fault; "none" is the gap before the first fault.
	MaxGap map[string]time.Duration

	// Gaps is the longest such gap after each fault, in order.
	Gaps []time.Duration

	// Holders paused past their TTL while holding, and those among them
	// not told of the loss by both OnLost and Release's error.
	Paused     int
	Unreported []string
}

// NewReport builds the report of a run that ended at end.
func NewReport(events []Event, faults []Fault, end time.Time) Report {
	r := Report{Counts: map[string]int{}, Faults: map[string]int{}, MaxGap: map[string]time.Duration{}}
	for _, ev := range events {
		r.Counts[ev.Kind]++
	}
	for _, f := range faults {
		r.Faults[f.Kind]++
	}
	r.gaps(events, faults, end)
	r.losses(events, faults)
	return r
}

// gaps attributes each gap between successive grants to the last fault
// that started before the gap ended.
func (r *Report) gaps(events []Event, faults []Fault, end time.Time) {
	var grants []time.Time
	for _, ev := range events {
		if ev.Kind == "grant" {
			grants = append(grants, ev.At)
		}
	}
	slices.SortFunc(grants, func(a, b time.Time) int { return a.Compare(b) })
	if len(grants) > 0 {
		grants = append(grants, end) // a stall that lasted to the end counts
	}
	r.Gaps = make([]time.Duration, len(faults))
	for i := 1; i < len(grants); i++ {
		kind, at := "none", -1
		for j, f := range faults {
			if f.Start.Before(grants[i]) {
				kind, at = f.Kind, j
			}
		}
		gap := grants[i].Sub(grants[i-1])
		r.MaxGap[kind] = max(r.MaxGap[kind], gap)
		if at >= 0 {
			r.Gaps[at] = max(r.Gaps[at], gap)
		}
	}
}

// losses checks that every holder paused past its TTL while holding its
// token was told of the loss, by OnLost and by Release's error.
func (r *Report) losses(events []Event, faults []Fault) {
	for _, f := range faults {
		if f.Kind != PauseHolder || !holding(events, f) {
			continue
		}
		r.Paused++
		var onLost, released bool
		for _, ev := range events {
			if ev.Worker != f.Worker || ev.Token != f.Token {
				continue
			}
			onLost = onLost || ev.Kind == "lost"
			released = released || (ev.Kind == "release" && strings.HasPrefix(ev.Detail, "lost"))
		}
		if !onLost || !released {
			r.Unreported = append(r.Unreported, fmt.Sprintf("%s: OnLost %v, Release's error %v", f.Detail, onLost, released))
		}
	}
}

// holding reports whether the paused worker still held its token when it
// was stopped: it had not reported the token's release before.
func holding(events []Event, f Fault) bool {
	for _, ev := range events {
		if ev.Worker == f.Worker && ev.Token == f.Token && ev.Kind == "release" && ev.At.Before(f.Start) {
			return false
		}
	}
	return true
}

// String prints the report.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations: %d grants, %d acknowledged writes, %d stale-token refusals, %d database errors, %d losses (OnLost), %d acquire errors\n",
		r.Counts["grant"], r.Counts["ack"], r.Counts["refused"], r.Counts["dberr"], r.Counts["lost"], r.Counts["acqerr"])
	fmt.Fprintf(&b, "holders paused past the TTL while holding: %d, loss not reported: %d\n", r.Paused, len(r.Unreported))
	fmt.Fprintf(&b, "%-22s %6s %s\n", "fault", "count", "longest gap between grants after it")
	for _, kind := range slices.Sorted(mapsKeys(r.MaxGap, r.Faults)) {
		fmt.Fprintf(&b, "%-22s %6d %v%s\n", kind, r.Faults[kind], r.MaxGap[kind].Round(time.Millisecond), target(kind, r.MaxGap[kind]))
	}
	return b.String()
}

// GapTarget is the bound on the longest gap between grants after an
// etcd leader kill or a member freeze, with a 2 s TTL.
const GapTarget = 3500 * time.Millisecond

// Targeted reports whether kind is held to GapTarget.
func Targeted(kind string) bool {
	return kind == LeaderKill || kind == MemberStallLeader || kind == MemberStallFollower
}

func target(kind string, gap time.Duration) string {
	switch {
	case !Targeted(kind):
		return ""
	case gap <= GapTarget:
		return fmt.Sprintf("  (target ≤ %v: met)", GapTarget)
	}
	return fmt.Sprintf("  (target ≤ %v: MISSED)", GapTarget)
}

func mapsKeys(a map[string]time.Duration, b map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for k := range a {
			seen[k] = true
		}
		for k := range b {
			seen[k] = true
		}
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	}
}
