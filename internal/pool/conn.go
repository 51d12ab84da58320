package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Conn is one authenticated server connection, past start-up and idle
// (ReadyForQuery 'I' read). While it is lent, the borrower may read and
// write NetConn and change Params and Prepared; the pool only keeps them.
type Conn struct {
	NetConn   net.Conn          // the raw connection (a *tls.Conn with TLS)
	PID       uint32            // the backend's process ID, for cancel
	SecretKey []byte            // the backend's cancel key
	Params    map[string]string // ParameterStatus values the server reported
	// Defaults are the ParameterStatus values the connection had when the
	// pool got it: what a new session of its key starts with, whatever
	// borrowers set since.
	Defaults map[string]string
	// Prepared belongs to the borrower: e.g. the server-side prepared
	// statements on this connection, name -> hash of the Parse body.
	Prepared map[string]uint64
	// Borrower is the borrower's too, kept with the connection: e.g. its
	// buffered reader and writer on NetConn.
	Borrower any

	Created  time.Time // when the pool got it from Dial
	Returned time.Time // when it was last released for reuse

	key  Key
	pool *Pool
	lent bool // guarded by pool.mu
}

// Key is the pool key the connection belongs to.
func (c *Conn) Key() Key { return c.key }

// terminate is the protocol's Terminate message.
var terminate = []byte{'X', 0, 0, 0, 4}

// close says goodbye to the server (best effort, bounded) and closes.
func (c *Conn) close() {
	c.NetConn.SetWriteDeadline(time.Now().Add(time.Second))
	c.NetConn.Write(terminate)
	c.NetConn.Close()
}

// Dialer opens server connections with pgconn: TCP (and TLS when set),
// start-up and authentication, then Hijack for the raw connection.
type Dialer struct {
	// Addr is the server's host:port.
	Addr string
	// TLS, when set, is used for the connection (sslmode=require or
	// stricter, as the caller built it); nil means no TLS.
	TLS *tls.Config
	// Password returns the password for key; nil or "" means none (trust).
	Password func(key Key) (string, error)
	// RuntimeParams are sent in the startup message (e.g.
	// application_name); the key's database, user and Startup parameters
	// are added (Startup's win).
	RuntimeParams map[string]string
}

// Dial opens one server connection for key; it is a [DialFunc].
func (d *Dialer) Dial(ctx context.Context, key Key) (*Conn, error) {
	cfg, err := d.config(key)
	if err != nil {
		return nil, err
	}
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pc.SyncConn(ctx); err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	hc, err := pc.Hijack()
	if err != nil {
		pc.Close(context.Background())
		return nil, err
	}
	if hc.TxStatus != 'I' {
		hc.Conn.Close()
		return nil, fmt.Errorf("server connection not idle after start-up (status %q)", hc.TxStatus)
	}
	return &Conn{
		NetConn:   hc.Conn,
		PID:       hc.PID,
		SecretKey: hc.SecretKey,
		Params:    hc.ParameterStatuses,
		Prepared:  make(map[string]uint64),
	}, nil
}

// config builds the pgconn configuration: from ParseConfig, as pgconn
// requires, with every field that matters set here, so that neither the
// environment (PG* variables) nor ~/.pgpass leaks in.
func (d *Dialer) config(key Key) (*pgconn.Config, error) {
	host, portStr, err := net.SplitHostPort(d.Addr)
	if err != nil {
		return nil, fmt.Errorf("upstream address %q: %w", d.Addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("upstream port %q: %w", portStr, err)
	}
	if key.User == "" || key.Database == "" {
		return nil, errors.New("key needs a database and a user")
	}
	cfg, err := pgconn.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = host, uint16(port)
	cfg.User, cfg.Database = key.User, key.Database
	cfg.Password = ""
	if d.Password != nil {
		if cfg.Password, err = d.Password(key); err != nil {
			return nil, fmt.Errorf("password for %s: %w", key, err)
		}
	}
	cfg.TLSConfig = d.TLS
	cfg.Fallbacks = nil
	cfg.ValidateConnect, cfg.AfterConnect = nil, nil
	cfg.ConnectTimeout = 0 // the pool's DialTimeout and the caller's ctx bound it
	cfg.RuntimeParams = make(map[string]string, len(d.RuntimeParams))
	for k, v := range d.RuntimeParams {
		cfg.RuntimeParams[k] = v
	}
	for k, v := range startupParams(key.Startup) {
		cfg.RuntimeParams[k] = v
	}
	return cfg, nil
}
