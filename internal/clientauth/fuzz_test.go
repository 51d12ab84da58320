package clientauth

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func FuzzSASLMessageParsers(f *testing.F) {
	f.Add(initialResponse("n,,n=,r=rOprNGfwEbeRWgbNEkqO"))
	f.Add(initialResponse("y,,n=user,r=abc,ext=1"))
	f.Add([]byte("c=biws,r=abcdef,p=" + strings.Repeat("A", 43) + "="))
	f.Add([]byte("c=biws,r=abcdef,x=ext,p=" + strings.Repeat("A", 43) + "="))
	f.Add([]byte("p=tls-server-end-point,,n=,r=abc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if first, err := parseInitialResponse(data); err == nil {
			if first.gs2Header != "n,," && first.gs2Header != "y,," {
				t.Fatalf("accepted gs2 header %q", first.gs2Header)
			}
			if !bytes.HasSuffix(data, []byte(first.gs2Header+first.bare)) {
				t.Fatalf("bare message %q is not the end of the message", first.bare)
			}
			if !printable(first.nonce) || !strings.Contains(first.bare, ",r="+first.nonce) {
				t.Fatalf("nonce %q", first.nonce)
			}
		}
		if first, err := parseClientFirst(string(data)); err == nil && !strings.HasSuffix(string(data), first.bare) {
			t.Fatalf("bare message %q is not the end of %q", first.bare, data)
		}
		const nonce = "abcdef"
		if final, err := parseClientFinal(data, "n,,", nonce); err == nil {
			if len(final.proof) != 32 {
				t.Fatalf("proof of %d bytes", len(final.proof))
			}
			if !strings.HasPrefix(final.withoutProof, "c="+base64.StdEncoding.EncodeToString([]byte("n,,"))+",r="+nonce) ||
				string(data) != final.withoutProof+",p="+base64.StdEncoding.EncodeToString(final.proof) {
				t.Fatalf("final message %q split as %q + proof", data, final.withoutProof)
			}
		}
	})
}

// initialResponse is a SASLInitialResponse body for SCRAM-SHA-256 with data.
func initialResponse(data string) []byte {
	b := binary.BigEndian.AppendUint32([]byte(scramMechanism+"\x00"), uint32(len(data)))
	return append(b, data...)
}

// message frames body as a PasswordMessage-type message.
func message(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{'p'}, uint32(len(body)+4)), body...)
}

// pipe is a client connection whose client sent in and reads out.
type pipe struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (p *pipe) Read(b []byte) (int, error)  { return p.in.Read(b) }
func (p *pipe) Write(b []byte) (int, error) { return p.out.Write(b) }

func FuzzAuthenticateRefusesWhateverAClientSends(f *testing.F) {
	f.Add(uint8(0), []byte("p\x00\x00\x00\x08pw\x00\x00"))
	f.Add(uint8(3), message(initialResponse("n,,n=,r=abcdefghi")))
	f.Add(uint8(1), message([]byte("md5000000000000000000000000000000000\x00")))
	users, err := Parse(strings.NewReader(`"u" "a long password nobody guesses"` + "\n" +
		`"m" "md5c0d7f9fbd3a0ec4a1e5d3c6f5dfe5b83"`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method uint8, client []byte) {
		p := &pipe{in: bytes.NewReader(client)}
		m := []Method{Password, MD5, SCRAMSHA256, SCRAMSHA256}[method%4]
		user := []string{"u", "m", "nobody"}[int(method/4)%3]
		err := Authenticate(p, user, m, users)
		if err == nil {
			t.Fatalf("%v login of %s accepted client bytes %q", m, user, client)
		}
		if errors.Is(err, ErrFailed) && !bytes.Contains(p.out.Bytes(), []byte("28P01")) {
			t.Fatalf("failed login without 28P01: %q", p.out.Bytes())
		}
	})
}

func FuzzParseAuthFile(f *testing.F) {
	f.Add(`"a" "b"` + "\n; c\n" + `"x""y" "md5c0d7f9fbd3a0ec4a1e5d3c6f5dfe5b83" rest`)
	f.Add(`"c" "SCRAM-SHA-256$4096:MDEy$ZHVtbXlzdG9yZWRrZXlkdW1teXN0b3JlZGtleTEyMzQ=:ZHVtbXlzZXJ2ZXJrZXlkdW1teXNlcnZlcmtleTEyMzQ="`)
	f.Fuzz(func(t *testing.T, text string) {
		file, err := Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		for u, s := range file.users {
			if u == "" || s.kind == 0 {
				t.Fatalf("user %q with secret kind %v", u, s.kind)
			}
		}
	})
}
