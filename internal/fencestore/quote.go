package fencestore

import (
	"strconv"
	"strings"
)

// appendLiteral appends s as an SQL string literal that means s whatever the
// session's standard_conforming_strings is. Without a backslash in s that is
// the plain '…' form with single quotes doubled, which both settings read
// alike. With one, the '…' form would be read differently when a client has
// turned standard_conforming_strings off, so s is dollar-quoted instead (raw
// text under every setting; PostgreSQL docs, "Dollar-Quoted String
// Constants"). E'…' is never used. s must not contain a NUL byte: no SQL
// text can carry one.
func appendLiteral(dst []byte, s string) []byte {
	if strings.IndexByte(s, '\\') >= 0 {
		return appendDollarQuoted(dst, s, "q")
	}
	dst = append(dst, '\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, '\'')
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, '\'')
}

// appendDollarQuoted appends $tag$s$tag$, with a tag made of base and, if
// needed, a number, so that the closing tag is the first occurrence of the tag
// after the opening one.
func appendDollarQuoted(dst []byte, s, base string) []byte {
	var buf [32]byte
	tag := append(append(append(buf[:0], '$'), base...), '$')
	for n := int64(1); !tagFits(s, string(tag)); n++ {
		tag = append(append(buf[:0], '$'), base...)
		tag = append(strconv.AppendInt(tag, n, 10), '$')
	}
	dst = append(dst, tag...)
	dst = append(dst, s...)
	return append(dst, tag...)
}

// tagFits reports whether tag ($name$, no $ inside name) occurs in s+tag only
// at its end. The lexer finds the first occurrence of the opening tag, so s
// must neither contain tag nor end with tag minus its last $ (which the
// closing tag would complete early).
func tagFits(s, tag string) bool {
	return !strings.Contains(s, tag) && !strings.HasSuffix(s, tag[:len(tag)-1])
}
