// Package sqlstate is the one home of the SQLSTATE codes fenceproxy
// reports to clients: PostgreSQL's own codes (Appendix A of its
// documentation, src/backend/utils/errcodes.txt) that the proxy uses for
// its own errors, and the fencing codes of class 55 that fenceproxy
// defines. Packages name them from here; SQL text sent to the server
// (internal/fencestore's functions) spells them out, and a test keeps the two
// in step.
package sqlstate
