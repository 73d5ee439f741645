// Package interchange implements total conversion between MessagePack and JSON.
package interchange
