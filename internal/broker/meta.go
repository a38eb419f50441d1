package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/exactq/exactq/internal/cluster/metadata"
)

// dataDirLock holds an exclusive flock on <data>/.lock so two brokers never share a
// directory: two writers on one log would corrupt it silently.
type dataDirLock struct{ f *os.File }

func lockDataDir(dir string) (*dataDirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another exactq process: %w", dir, err)
	}
	return &dataDirLock{f: f}, nil
}

func (l *dataDirLock) release() {
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}

// metaProperties is the identity of a data directory, kept in <data>/meta.json. The cluster
// id is generated once and never changes, so clients that cache it see a stable cluster.
type metaProperties struct {
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id"`
	NodeID    int32  `json:"node_id"`
	// DirectoryID is the directory's random id (Kafka's directory.id, in its Uuid text
	// form), made once: the broker registers with it, so the cluster can tell a node that
	// comes back with an empty disk from the one it was.
	DirectoryID string `json:"directory_id,omitempty"`
}

// directoryID is the directory id as bytes.
func (m metaProperties) directoryID() ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(m.DirectoryID)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("meta.json: bad directory_id %q", m.DirectoryID)
	}
	copy(id[:], b)
	return id, nil
}

// newDirectoryID is a random directory id outside Kafka's reserved ones (the first 100).
func newDirectoryID() string {
	for {
		u := newUUID()
		if binary.BigEndian.Uint64(u[:8]) != 0 {
			return base64.RawURLEncoding.EncodeToString(u[:])
		}
	}
}

func loadOrCreateMeta(dir string, nodeID int32) (metaProperties, error) {
	path := filepath.Join(dir, "meta.json")
	var m metaProperties
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &m); err != nil {
			return m, fmt.Errorf("corrupt %s: %w", path, err)
		}
		if m.NodeID != nodeID {
			return m, fmt.Errorf("data directory %s belongs to node %d, not %d", dir, m.NodeID, nodeID)
		}
		if m.DirectoryID == "" { // made before directory ids: give it one, once
			m.DirectoryID = newDirectoryID()
			return m, writeJSONAtomic(path, m)
		}
		_, err := m.directoryID()
		return m, err
	case errors.Is(err, os.ErrNotExist):
		m = metaProperties{Version: 1, ClusterID: newClusterID(), NodeID: nodeID, DirectoryID: newDirectoryID()}
		return m, writeJSONAtomic(path, m)
	default:
		return m, err
	}
}

// newClusterID makes a Kafka-style cluster id: a random UUID in URL-safe base64 that, as
// Kafka's Uuid.randomUuid, never starts with '-' (command lines, kafka-storage's among
// them, would read it as an option).
func newClusterID() string {
	for {
		var u [16]byte
		rand.Read(u[:])
		if id := base64.RawURLEncoding.EncodeToString(u[:]); id[0] != '-' {
			return id
		}
	}
}

func newUUID() [16]byte {
	var u [16]byte
	for u == ([16]byte{}) {
		rand.Read(u[:])
	}
	return u
}

// writeJSONAtomic replaces path with v: write a temp file, fsync it, rename it over path,
// fsync the directory. A crash leaves either the old or the new content, never a mix.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

func writeFileAtomic(path string, b []byte) error {
	tmp := tempPath(path)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// maxFileNameBytes is the longest file name Linux file systems take (NAME_MAX).
const maxFileNameBytes = 255

// tempPath is the temporary file a replacement of path is written to: path+".tmp", or,
// where that name would not fit maxFileNameBytes (a topic record of a 247-249 character
// topic name: "<name>.json.tmp"), a name made of a hash of the file's name. Either ends in
// ".tmp", which start-up removes from the topics directory.
func tempPath(path string) string {
	dir, name := filepath.Split(path)
	if len(name)+len(".tmp") <= maxFileNameBytes {
		return path + ".tmp"
	}
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+".tmp")
}

// replaceFileNoSync replaces path with b through a temporary file and a rename, without
// fsyncs: readers see the old or the new content, but a machine crash may leave either, or
// an empty or torn file. Only for files whose every such state is safe to read.
func replaceFileNoSync(path string, b []byte) error {
	tmp := tempPath(path)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// producerIDs hands out producer ids, from blocks the controller gives (AllocateProducerIds,
// whose ProducerIdsRecord is in the metadata log before an id of the block is used), so a
// restart, or another broker, never reissues an id (which would let a new producer collide
// with an old one's sequence state).
//
// The first block is reserved when the broker opens, before it serves, and the next one is
// fetched in the background once 90% of the current one is handed out (Kafka's
// RPCProducerIdManager), so InitProducerId waits for the controller only when a block ran
// out before its successor arrived (a controller down, a burst). The first InitProducerId
// after a restart once waited for a reservation: that was the window in which a SIGKILL
// left a client with a request the broker had read but never answered, and kgo fails an
// EOF on the first response of a connection without retrying (ErrFirstReadEOF).
type producerIDs struct {
	mu    sync.Mutex
	b     *Broker
	next  int64
	limit int64 // the end of the block being handed out
	// pending is the next block, fetched ahead [start, end); fetching is set while a
	// background fetch runs; closed stops new ones (close waits for the running one).
	pending    *[2]int64
	fetching   bool
	fetched    *sync.Cond // on mu: a background fetch ended (fetching went false)
	closed     bool
	ctx        context.Context
	cancel     context.CancelFunc
	prefetches sync.WaitGroup
}

const producerIDBlock = 1000

// producerIDPrefetchAt is how many ids may be left in the block when the next one is
// fetched: 10% of a block.
const producerIDPrefetchAt = producerIDBlock / 10

// openProducerIDs starts with no block; reserveFirst then gets one.
func openProducerIDs(b *Broker, im *metadata.Image) *producerIDs {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producerIDs{b: b, next: im.ProducerIDs.Next, limit: im.ProducerIDs.Next, ctx: ctx, cancel: cancel}
	p.fetched = sync.NewCond(&p.mu)
	return p
}

// reserveFirst reserves the first block at start-up. A failure (a full disk) does not stop
// the broker from starting, serving reads and the producers it knows: the first
// InitProducerId tries again, and is answered KAFKA_STORAGE_ERROR while it fails.
func (p *producerIDs) reserveFirst() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserve()
}

// reserve gets the next block at once (the block ran out, or start-up). Called with mu
// held, or before p is shared.
func (p *producerIDs) reserve() error {
	start, end, err := p.fetchBlock(p.ctx)
	if err != nil {
		return err
	}
	p.next, p.limit = start, end
	return nil
}

// fetchBlock asks the controller for a block and returns it once its record is applied on
// this node (a produce's producer id is checked against this node's image: issued).
func (p *producerIDs) fetchBlock(ctx context.Context) (start, end int64, err error) {
	r := p.b.reg
	epoch := r.Epoch()
	if epoch < 0 {
		return 0, 0, errors.New("not registered with the controller yet")
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = p.b.cfg.NodeID, epoch
	ctx, cancel := context.WithTimeout(ctx, metadataProposeTimeout)
	defer cancel()
	resp, idx, err := p.b.ctl.Call(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	ar := resp.(*kmsg.AllocateProducerIDsResponse)
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("AllocateProducerIds: %w", err)
	}
	if err := p.b.meta.WaitApplied(ctx, idx); err != nil {
		return 0, 0, fmt.Errorf("AllocateProducerIds: applying the block: %w", err)
	}
	return ar.ProducerIDStart, ar.ProducerIDStart + int64(ar.ProducerIDLen), nil
}

// prefetch fetches the next block in the background when the current one is nearly used
// up. Called with mu held.
func (p *producerIDs) prefetch() {
	if p.closed || p.fetching || p.pending != nil || p.limit-p.next > producerIDPrefetchAt {
		return
	}
	p.fetching = true
	p.prefetches.Add(1)
	go func() {
		defer p.prefetches.Done()
		start, end, err := p.fetchBlock(p.ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.fetching = false
		defer p.fetched.Broadcast()
		if err != nil {
			if !p.closed {
				p.b.logger.Warn("fetching the next producer-id block; the block in use runs out first", "err", err)
			}
			return
		}
		p.pending = &[2]int64{start, end}
	}()
}

// close stops fetching ahead and waits for a fetch in progress; before the controller
// client and the metadata log close.
func (p *producerIDs) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.prefetches.Wait()
}

// allocate returns a new producer id. It waits for the controller only when the block is
// used up and the next one has not arrived.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.next >= p.limit {
		switch {
		case p.pending != nil:
			b := p.pending
			p.next, p.limit, p.pending = b[0], b[1], nil
		case p.fetching:
			// The next block is on its way: wait for it rather than reserve another
			// beside it, which would come after it and leave the ids it hands out
			// below those already issued (ids must only grow, as from one block).
			p.fetched.Wait()
		default:
			if err := p.reserve(); err != nil {
				return -1, err
			}
		}
	}
	id := p.next
	p.next++
	if id == 0 {
		// Producer id 0 is never handed out, so that (0, 0) is never a real producer id
		// and epoch: twopc.PreparedTxnState's zero value (kgoext/twopc) means "no transaction".
		id = p.next
		p.next++
	}
	p.prefetch()
	return id, nil
}
