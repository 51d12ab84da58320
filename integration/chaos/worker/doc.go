// Command worker is one worker process of the chaos suite
// (integration/chaos): it takes a lockclient lock on an etcd cluster (or, with
// -backend, on Redis or ZooKeeper), again
// and again, and under each grant increments one counter in PostgreSQL by
// read-modify-write, carrying the grant's fencing token (by default as
// startup parameters, as `fenceproxy lock run` does through PGOPTIONS; with
// -token also as a session SET, SET LOCAL or a comment, the forms taken in
// turn from grant to grant). It pauses
// between the read and the write, as real work would, and never checks the
// lock before writing: the fencing token alone must keep the data right.
//
// Every step is one line on stdout, "<unix ns> <worker> <kind> <token>
// <detail>", for the suite's checker: grant, read (detail: the value),
// refused (a stale token, SQLSTATE 55Z01), ack (detail: the value
// committed), dberr, lost (the OnLost callback), release (detail: ok, lost
// or the error), acqerr. It stops when stdin is closed. Built and run by
// the chaos tests only.
package main
