package bridge

import (
	"context"

	"github.com/capbridge/capbridge/bridge/control"
)

// Reload reads the configuration again and applies it without a restart.
func (b *Bridge) Reload(ctx context.Context, trigger string) (*control.Reloaded, error) {
	return nil, &control.Error{Code: control.CodeBadConfig, Message: "this capbridge has no configuration file to read again"}
}
