package packaging

import (
	"os"
	"testing"

	"github.com/fenceproxy/fenceproxy/integration/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
