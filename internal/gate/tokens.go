package gate

import (
	"errors"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/encoding/protowire"
)

// token is one token of PostgreSQL's scanner: its byte span and kind.
type token struct {
	start, end int
	kind       pg_query.Token
}

// errBadScan is a scan result this decoder does not understand.
var errBadScan = errors.New("scanner returned a malformed result")

// scanTokens scans sql with PostgreSQL's scanner, as pg_query.Scan does,
// and decodes its protobuf ScanResult straight from the wire format into a
// flat slice: one allocation, where proto.Unmarshal makes one message per
// token (half the cost of a scan of a large text). Every span is checked to
// lie within sql.
func scanTokens(sql string) ([]token, error) {
	pb, err := parser.ScanToProtobuf(sql)
	if err != nil {
		return nil, err
	}
	toks := make([]token, 0, len(pb)/10) // a token takes 8 to 16 bytes
	for len(pb) > 0 {
		num, typ, n := protowire.ConsumeTag(pb)
		if n < 0 {
			return nil, errBadScan
		}
		pb = pb[n:]
		if num == 2 && typ == protowire.BytesType { // ScanResult.tokens
			msg, n := protowire.ConsumeBytes(pb)
			if n < 0 {
				return nil, errBadScan
			}
			t, err := decodeToken(msg, len(sql))
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			pb = pb[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, pb) // ScanResult.version
		if n < 0 {
			return nil, errBadScan
		}
		pb = pb[n:]
	}
	return toks, nil
}

// decodeToken decodes one ScanToken: start (1), end (2), token (4); the
// keyword kind (5) is not needed.
func decodeToken(msg []byte, textLen int) (token, error) {
	var t token
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return t, errBadScan
		}
		msg = msg[n:]
		if typ != protowire.VarintType {
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return t, errBadScan
			}
			msg = msg[n:]
			continue
		}
		v, n := protowire.ConsumeVarint(msg)
		if n < 0 {
			return t, errBadScan
		}
		msg = msg[n:]
		switch num {
		case 1:
			t.start = int(int32(v))
		case 2:
			t.end = int(int32(v))
		case 4:
			t.kind = pg_query.Token(int32(v))
		}
	}
	if t.start < 0 || t.start > t.end || t.end > textLen {
		return t, errBadScan
	}
	return t, nil
}
