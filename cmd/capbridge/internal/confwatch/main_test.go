package confwatch

import (
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
