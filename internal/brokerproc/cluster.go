package brokerproc

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
)

// ClusterOptions say how to start a cluster of exactq nodes, each a broker and a voter of
// one metadata quorum (serve --node-id, --voters, --controller-listen), on loopback.
type ClusterOptions struct {
	Binary string
	// Dir holds the nodes' data directories, node-<id>.
	Dir   string
	Nodes int      // node ids 0 .. Nodes-1
	Args  []string // added to every node's serve command (after the cluster flags)
	Node  Options  // the rest of every node's options (Fsync, LogLevel, Env, Echo, ...)
}

// Cluster is a running (or partly stopped) cluster of exactq processes. Every node keeps
// its client and controller addresses across restarts, as its peers and clients know them.
type Cluster struct {
	opts ClusterOptions
	// Client and Controller are each node's client and controller listener (host:port).
	Client, Controller []string

	mu    sync.Mutex
	procs []*Process // nil while a node is stopped
}

// StartCluster picks free loopback ports for every node's two listeners and starts the
// nodes at once (a node serves once it is registered with the elected controller, which
// needs a majority of them up).
func StartCluster(o ClusterOptions) (*Cluster, error) {
	if o.Nodes < 1 {
		return nil, errors.New("brokerproc: a cluster needs a node")
	}
	c := &Cluster{opts: o, procs: make([]*Process, o.Nodes)}
	for range 2 * o.Nodes {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		if len(c.Client) < o.Nodes {
			c.Client = append(c.Client, addr)
		} else {
			c.Controller = append(c.Controller, addr)
		}
	}
	errs := make([]error, o.Nodes)
	var wg sync.WaitGroup
	for i := range o.Nodes {
		wg.Go(func() { errs[i] = c.Start(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// freeAddr is a loopback address whose port the kernel just gave out and nobody holds.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Voters is the --voters flag of the cluster: id@controller-listener, every node.
func (c *Cluster) Voters() string {
	var vs []string
	for i, a := range c.Controller {
		vs = append(vs, fmt.Sprintf("%d@%s", i, a))
	}
	return strings.Join(vs, ",")
}

// Bootstrap is every node's client address, comma-separated (a client's bootstrap list).
func (c *Cluster) Bootstrap() string { return strings.Join(c.Client, ",") }

// DataDir is node i's data directory.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.opts.Dir, fmt.Sprintf("node-%d", i)) }

// Start starts node i (again) on its addresses and data directory, and returns once it
// serves.
func (c *Cluster) Start(i int) error {
	o := c.opts.Node
	o.Binary, o.DataDir, o.Listen = c.opts.Binary, c.DataDir(i), c.Client[i]
	o.Args = append([]string{"--node-id", fmt.Sprint(i), "--voters", c.Voters(), "--controller-listen", c.Controller[i]},
		append(c.opts.Args, o.Args...)...)
	p, err := Start(o)
	if err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	return nil
}

// Process is node i's process, nil while it is stopped.
func (c *Cluster) Process(i int) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

// Kill sends node i SIGKILL and waits for it to be gone.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Stop terminates every running node at once (SIGTERM, killed after 30 s); for cleanups.
func (c *Cluster) Stop() {
	c.mu.Lock()
	procs := c.procs
	c.procs = make([]*Process, len(procs))
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(p.Stop)
		}
	}
	wg.Wait()
}
