package broker

import (
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/groupconfig"
)

// groupConfigs holds the GROUP config resource's overrides (share.auto.offset.reset and the
// like), kept in <data>/group-configs.json and rewritten atomically on every change. Kafka
// keeps them in its metadata log; one small file is the single-node equivalent.
type groupConfigs struct {
	path   string
	broker *groupconfig.Broker

	mu        sync.RWMutex
	overrides map[string]map[string]string // guarded by mu
}

func openGroupConfigs(dir string, static map[string]string) (*groupConfigs, error) {
	gb, err := groupconfig.NewBroker(static)
	if err != nil {
		return nil, err
	}
	gc := &groupConfigs{path: filepath.Join(dir, "group-configs.json"), broker: gb, overrides: map[string]map[string]string{}}
	if err := readJSON(gc.path, &gc.overrides); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return gc, nil
}

// Resolve returns a group's effective configuration.
func (gc *groupConfigs) Resolve(groupID string) groupconfig.Resolved {
	gc.mu.RLock()
	defer gc.mu.RUnlock()
	return gc.broker.Resolve(gc.overrides[groupID])
}

func (gc *groupConfigs) describe(groupID string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	gc.mu.RLock()
	defer gc.mu.RUnlock()
	return gc.broker.Describe(gc.overrides[groupID], names, docs)
}

// alter applies IncrementalAlterConfigs operations to one group and makes them durable.
func (gc *groupConfigs) alter(groupID string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) *adminError {
	return gc.change(groupID, validateOnly, func(cur map[string]string) (map[string]string, error) {
		return gc.broker.ApplyIncremental(cur, ops)
	})
}

// replace applies a legacy AlterConfigs request (the configs given become the group's whole
// override set) and makes it durable.
func (gc *groupConfigs) replace(groupID string, configs []kmsg.AlterConfigsRequestResourceConfig, validateOnly bool) *adminError {
	return gc.change(groupID, validateOnly, func(map[string]string) (map[string]string, error) {
		return gc.broker.ApplyAlter(configs)
	})
}

// change validates a group's new override set, computed from the current one, and unless
// validateOnly makes it durable and live.
func (gc *groupConfigs) change(groupID string, validateOnly bool, compute func(cur map[string]string) (map[string]string, error)) *adminError {
	if groupID == "" {
		return newAdminError(kerr.InvalidRequest, "Group name must not be empty")
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	next, err := compute(gc.overrides[groupID])
	if err != nil {
		var ce *groupconfig.Error
		if errors.As(err, &ce) {
			return &adminError{err: ce.Kind, msg: ce.Message}
		}
		return newAdminError(kerr.InvalidConfig, "%v", err)
	}
	if validateOnly {
		return nil
	}
	all := make(map[string]map[string]string, len(gc.overrides)+1)
	for g, o := range gc.overrides {
		all[g] = o
	}
	if len(next) == 0 {
		delete(all, groupID)
	} else {
		all[groupID] = next
	}
	if err := writeJSONAtomic(gc.path, all); err != nil {
		return newAdminError(kerr.KafkaStorageError, "%v", err)
	}
	gc.overrides = all
	return nil
}
