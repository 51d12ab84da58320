package gate_test

import (
	"errors"
	"fmt"

	"github.com/fenceproxy/fenceproxy/internal/gate"
)

func ExampleAnalyze() {
	a, err := gate.Analyze("BEGIN; UPDATE orders SET paid = true WHERE id = 42 /*fencing_token='42',resource='orders%2F42'*/; COMMIT")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, st := range a.Statements {
		fmt.Printf("%-6v writes=%v token=%d resource=%q\n", st.Kind, st.Writes, st.Directives.Token, st.Directives.Resource)
	}
	// Output:
	// Begin  writes=[] token=0 resource=""
	// Write  writes=[orders] token=42 resource="orders/42"
	// Commit writes=[] token=0 resource=""
}

func ExampleParseToken() {
	for _, s := range []string{"42", "0", "abc"} {
		tok, err := gate.ParseToken(s)
		var te *gate.TokenError
		if errors.As(err, &te) {
			fmt.Println(te.SQLState(), err)
			continue
		}
		fmt.Println(tok)
	}
	// Output:
	// 42
	// 22023 invalid fencing token "0": not positive
	// 22023 invalid fencing token "abc": not an integer
}
