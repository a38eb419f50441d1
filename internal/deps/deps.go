//go:build tools

// Package deps pins modules that tests and tools use before the code that needs them lands.
package deps

import (
	_ "github.com/IBM/sarama"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "golang.org/x/sys/unix"
	_ "pgregory.net/rapid"
)
