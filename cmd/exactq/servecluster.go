package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/exactq/exactq/internal/cluster/node"
)

// clusterSettings are the cluster part of serve's options once checked
// (docs/architecture.md, "Nodes, roles and configuration"). Voters nil is the zero-config
// node: a lone voter of itself, no controller listener.
type clusterSettings struct {
	Voters           map[int32]string // node id → controller listener, this node's among them
	ControllerListen string           // where this node's controller listener binds
}

// clusterOf checks the roles, node id, voters and controller listener.
func clusterOf(opts serveOptions) (clusterSettings, error) {
	var c clusterSettings
	if opts.nodeID < 0 || opts.nodeID > 1<<31-1 {
		return c, fmt.Errorf("node.id must be from 0 to %d, not %d", 1<<31-1, opts.nodeID)
	}
	roles := map[string]bool{}
	for r := range strings.SplitSeq(opts.processRoles, ",") {
		r = strings.TrimSpace(r)
		if r != "broker" && r != "controller" {
			return c, fmt.Errorf("process.roles: unknown role %q (broker, controller or both)", r)
		}
		roles[r] = true
	}
	switch {
	case !roles["broker"]:
		return c, errors.New("process.roles=controller: controller-only nodes are not supported (the raft leader is always a broker too); use broker,controller")
	case !roles["controller"]:
		return c, errors.New("process.roles=broker: broker-only nodes come with learners (not built yet); use broker,controller")
	}
	if opts.voters == "" {
		if opts.controllerListen != "" {
			return c, errors.New("--controller-listen without --voters: a node without voters is a lone voter and opens no controller listener")
		}
		return c, nil
	}
	voters, err := node.ParseVoters(opts.voters)
	if err != nil {
		return c, fmt.Errorf("controller.quorum.voters: %w", err)
	}
	self := int32(opts.nodeID)
	if _, ok := voters[self]; !ok {
		return c, fmt.Errorf("node %d is a controller but controller.quorum.voters names only %v", self, slices.Sorted(maps.Keys(voters)))
	}
	c.Voters = voters
	if len(voters) == 1 {
		return c, nil // this node alone: a lone voter, no listener (Kafka's one-node quickstart)
	}
	if opts.controllerListen == "" {
		return c, fmt.Errorf("node %d has other voters but no controller listener (--controller-listen, or a CONTROLLER:// entry in listeners)", self)
	}
	if _, _, err := net.SplitHostPort(opts.controllerListen); err != nil {
		return c, fmt.Errorf("controller listener %q: %v", opts.controllerListen, err)
	}
	if opts.controllerListen == opts.listen {
		return c, fmt.Errorf("the controller listener and the client listener are both %s", opts.listen)
	}
	c.ControllerListen = opts.controllerListen
	return c, nil
}

// advertisedListeners sets --advertised from Kafka's advertised.listeners, which names at
// most the client listener (PLAINTEXT://host:port); a CONTROLLER entry is allowed and
// ignored, as Kafka ignores it for brokers (the controller listener is what the voters
// list names).
func advertisedListeners(fs *pflag.FlagSet, v string) error {
	var client string
	entries, err := listenerEntries(v)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name, addr, entry := e[0], e[1], e[0]+"://"+e[1]
		if err := node.CheckAddr(addr); err != nil {
			return err
		}
		switch {
		case strings.EqualFold(name, "PLAINTEXT"):
			if client != "" {
				return errors.New("two PLAINTEXT entries")
			}
			client = addr
		case strings.EqualFold(name, "CONTROLLER"):
		default:
			return fmt.Errorf("%q: exactq has one client listener, PLAINTEXT", entry)
		}
	}
	if client == "" || fs.Changed("advertised") {
		return nil
	}
	return fs.Set("advertised", client)
}

// fileListeners holds the properties keys that only make sense together: Kafka's
// listeners list and the names in controller.listener.names.
type fileListeners struct {
	listeners, controllerNames string
	seen                       bool
}

// take keeps a listener key for resolve; false for any other key.
func (fl *fileListeners) take(k, v string) bool {
	switch k {
	case "listeners":
		fl.listeners = v
	case "controller.listener.names":
		fl.controllerNames = v
	default:
		return false
	}
	fl.seen = true
	return true
}

// resolve sets --listen and --controller-listen from listeners, as Kafka spells it:
// "PLAINTEXT://host:9092,CONTROLLER://host:9093" with controller.listener.names=CONTROLLER.
// exactq has one client listener (PLAINTEXT) and at most one controller listener; flags on
// the command line win.
func (fl *fileListeners) resolve(fs *pflag.FlagSet) error {
	if !fl.seen {
		return nil
	}
	ctlName := strings.TrimSpace(fl.controllerNames)
	if strings.Contains(ctlName, ",") {
		return fmt.Errorf("controller.listener.names=%s: exactq has one controller listener", ctlName)
	}
	var client, ctl string
	entries, err := listenerEntries(fl.listeners)
	if err != nil {
		return fmt.Errorf("listeners: %w", err)
	}
	for _, e := range entries {
		name, addr, entry := e[0], e[1], e[0]+"://"+e[1]
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("listeners: %q: %v", entry, err)
		}
		switch {
		case ctlName != "" && strings.EqualFold(name, ctlName):
			if ctl != "" {
				return fmt.Errorf("listeners: two %s entries", name)
			}
			ctl = addr
		case strings.EqualFold(name, "PLAINTEXT"):
			if client != "" {
				return errors.New("listeners: two PLAINTEXT entries")
			}
			client = addr
		default:
			return fmt.Errorf("listeners: %q: exactq has one client listener, PLAINTEXT, and the controller listener named by controller.listener.names", entry)
		}
	}
	if ctlName != "" && ctl == "" {
		return fmt.Errorf("controller.listener.names=%s but listeners has no %s:// entry", ctlName, ctlName)
	}
	for flag, v := range map[string]string{"listen": client, "controller-listen": ctl} {
		if v != "" && !fs.Changed(flag) {
			if err := fs.Set(flag, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// listenerEntries splits a Kafka listener list, "NAME://host:port,...", into its
// (name, address) pairs, skipping empty entries.
func listenerEntries(v string) ([][2]string, error) {
	var out [][2]string
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, addr, ok := strings.Cut(entry, "://")
		if !ok {
			return nil, fmt.Errorf("%q is not NAME://host:port", entry)
		}
		out = append(out, [2]string{name, addr})
	}
	return out, nil
}

// logDirs sets --data-dir from log.dirs (or log.dir), which must name one directory.
func logDirs(fs *pflag.FlagSet, v string) error {
	var dirs []string
	for d := range strings.SplitSeq(v, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) != 1 {
		return fmt.Errorf("%q: exactq takes one data directory (several come with JBOD)", v)
	}
	if fs.Changed("data-dir") {
		return nil
	}
	return fs.Set("data-dir", dirs[0])
}
