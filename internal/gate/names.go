package gate

// names is a map by statement or portal name that keeps the unnamed one
// ("") in a field of its own. Drivers run most statements through the
// unnamed statement and portal, defining and dropping them at every
// message; a field costs a fraction of a map write, delete and clear.
type names[V any] struct {
	m       map[string]V
	unnamed V
	has     bool // unnamed holds a value
}

func (n *names[V]) get(name string) (V, bool) {
	if name == "" {
		return n.unnamed, n.has
	}
	v, ok := n.m[name]
	return v, ok
}

func (n *names[V]) set(name string, v V) {
	if name == "" {
		n.unnamed, n.has = v, true
		return
	}
	if n.m == nil {
		n.m = map[string]V{}
	}
	n.m[name] = v
}

func (n *names[V]) del(name string) {
	if name == "" {
		var zero V
		n.unnamed, n.has = zero, false
		return
	}
	delete(n.m, name)
}

func (n *names[V]) clear() {
	n.del("")
	if len(n.m) > 0 {
		clear(n.m)
	}
}

// all yields every name and its value; the loop may set or delete the
// name it is given.
func (n *names[V]) all(yield func(string, V) bool) {
	if n.has && !yield("", n.unnamed) {
		return
	}
	for k, v := range n.m {
		if !yield(k, v) {
			return
		}
	}
}
