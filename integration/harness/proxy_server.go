package harness

import "github.com/fenceproxy/fenceproxy/internal/pgwire"

// Server returns the proxy's pgwire.Server, for tests of its admin view
// (Sessions, Resources, Terminate).
func (p *Proxy) Server() *pgwire.Server { return p.srv }
