package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/controller"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/peer"
	"github.com/exactq/exactq/wire"
)

// The broker's life with the controller (docs/architecture.md, "Registration, heartbeats,
// fencing"): at start it registers (BrokerRegistration: its listener, directory id,
// supported features, a new incarnation id) and heartbeats until unfenced, before it
// serves; then it heartbeats every broker.heartbeat.interval.ms with its applied metadata
// index, registers again when told its epoch is stale, and at Close asks for a controlled
// shutdown. A zero-config broker's controller is its own node's (controller.Driver on the
// lone voter), reached in process: the same requests a cluster sends over the network.
//
// The broker does not wait for the controller forever: a node that cannot register at
// start (its metadata log is down, a full disk) starts anyway, serving what it has, and
// keeps trying in the background.

// registrationStartWait bounds how long Open waits to be registered and unfenced.
const registrationStartWait = 10 * time.Second

// controlledShutdownWait bounds how long Close waits for the controller to fence it.
const controlledShutdownWait = 5 * time.Second

type registration struct {
	b           *Broker
	ctlCancel   context.CancelFunc
	ctlDone     chan struct{}
	incarnation [16]byte
	dirID       [16]byte
	interval    time.Duration

	mu     sync.Mutex
	epoch  int64 // -1 until registered
	fenced bool

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newDriver is this node's controller (it decides only while this node leads). A node
// with other voters gives it the records a new cluster starts with: the first controller
// of the log proposes them (a lone voter's broker bootstraps its log itself).
func (b *Broker) newDriver() *controller.Driver {
	cfg := controller.Config{NodeID: b.cfg.NodeID, Admin: admin.Config{
		Topic: b.defaults.topic, Group: b.groupCfg.broker, MaxBrokerPartitions: b.maxPartitions,
		MaxReplicationFactor: 1, // until partitions are replicated (#13)
	}, HeartbeatInterval: b.cfg.HeartbeatInterval, SessionTimeout: b.cfg.SessionTimeout}
	if b.multiVoter() {
		cfg.Bootstrap = append([]wire.MetadataRecord{&wire.ClusterRecord{ClusterID: b.dir.ClusterID, CreatedMillis: b.now().UnixMilli()}},
			admin.InitialFeatures()...)
	}
	return controller.NewDriver(controller.Options{Config: cfg, Quorum: brokerQuorum{b}, Logger: b.logger})
}

// multiVoter: the node is configured with other voters.
func (b *Broker) multiVoter() bool {
	for id := range b.cfg.Voters {
		if id != b.cfg.NodeID {
			return true
		}
	}
	return false
}

// heartbeatInterval is broker.heartbeat.interval.ms.
func (b *Broker) heartbeatInterval() time.Duration {
	if b.cfg.HeartbeatInterval > 0 {
		return b.cfg.HeartbeatInterval
	}
	return 2 * time.Second
}

// startController starts this node's controller and registers with the cluster's: on
// return the broker is registered and unfenced, or a background loop keeps trying.
func (b *Broker) startController() error {
	dirID, err := b.dir.directoryID()
	if err != nil {
		return err
	}
	ctl := b.driver
	local := localController{d: ctl, n: b.meta}
	if b.meta.Clustered() {
		// Connections of the broker's own to the controller listeners, not the node's
		// raft connections (see node.ControllerAddrOf); closed after the controlled
		// shutdown.
		b.ctlTransport = peer.NewTCP(peer.Config{Self: b.cfg.NodeID, Addr: b.meta.ControllerAddrOf})
		b.ctl = networkController{self: b.cfg.NodeID, local: local, tr: b.ctlTransport, logger: b.logger}
	} else {
		b.ctl = local
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &registration{b: b, ctlCancel: cancel, ctlDone: make(chan struct{}), incarnation: newUUID(), dirID: dirID,
		interval: b.heartbeatInterval(), epoch: -1, fenced: true, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.ctlDone)
		_ = ctl.Run(ctx)
	}()
	b.reg = r
	wait, cancelWait := context.WithTimeout(context.Background(), registrationStartWait)
	defer cancelWait()
	if err := r.joinOnce(wait); err != nil {
		b.logger.Warn("not registered with the controller yet; serving what this node has and retrying", "err", err)
	}
	go r.run()
	return nil
}

// call sends a controller request to the controller.
func (r *registration) call(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := r.b.ctl.Call(ctx, req)
	return resp, err
}

// joinOnce registers if not registered, then heartbeats until unfenced.
func (r *registration) joinOnce(ctx context.Context) error {
	for {
		epoch, fenced := r.state()
		if epoch < 0 {
			if err := r.register(ctx); err != nil {
				return err
			}
			continue
		}
		if !fenced {
			return nil
		}
		if err := r.heartbeat(ctx, false); err != nil {
			return err
		}
		if _, fenced := r.state(); fenced {
			select { // caught up but not unfenced yet: the controller decides at its pace
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

func (r *registration) state() (epoch int64, fenced bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, r.fenced
}

// Epoch is the broker epoch the controller gave this broker, -1 when not registered.
func (r *registration) Epoch() int64 {
	e, _ := r.state()
	return e
}

func (r *registration) register(ctx context.Context) error {
	b := r.b
	im, err := r.clusterImage(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = b.cfg.NodeID, im.Cluster.ID, r.incarnation
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port, l.SecurityProtocol = "PLAINTEXT", b.cfg.AdvertisedHost, uint16(b.cfg.AdvertisedPort), 0
	req.Listeners = append(req.Listeners, l)
	// metadata.version is listed because every registration must: exactq does not gate
	// record versions by it yet, so it claims no level (0-0) and finalizes none.
	mv := kmsg.NewBrokerRegistrationRequestFeature()
	mv.Name = "metadata.version"
	req.Features = append(req.Features, mv)
	for _, s := range admin.SupportedFeatures {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = s.Name, 0, s.MaxLevel
		req.Features = append(req.Features, f)
	}
	if b.cfg.Rack != "" {
		rack := b.cfg.Rack
		req.Rack = &rack
	}
	req.LogDirs = [][16]byte{r.dirID}
	req.PreviousBrokerEpoch = r.Epoch()
	resp, err := r.call(ctx, req)
	if err != nil {
		return err
	}
	rr := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
		return fmt.Errorf("BrokerRegistration: %w", err)
	}
	r.mu.Lock()
	r.epoch, r.fenced = rr.BrokerEpoch, true
	r.mu.Unlock()
	b.logger.Info("registered with the controller", "broker_epoch", rr.BrokerEpoch)
	return nil
}

// clusterImage is the image once it holds the cluster id, which a registration names: at
// once on a bootstrapped log, after the first controller's first entry in a new cluster
// of several voters.
func (r *registration) clusterImage(ctx context.Context) (*metadata.Image, error) {
	for {
		im, _ := r.b.image()
		if im.Cluster.ID != "" {
			return im, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no cluster id in the metadata log yet: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// heartbeat sends one BrokerHeartbeat; a stale epoch forgets the registration (the next
// round registers again).
func (r *registration) heartbeat(ctx context.Context, wantShutdown bool) error {
	epoch, _ := r.state()
	// The metadata offset is what the broker has applied (its publisher), as KRaft's
	// brokers report: unfenced only once it serves what it registered at.
	applied := r.b.pub.applied()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantShutdown = r.b.cfg.NodeID, epoch, int64(applied), wantShutdown
	resp, err := r.call(ctx, req)
	if err != nil {
		return err
	}
	hr := resp.(*kmsg.BrokerHeartbeatResponse)
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		if errors.Is(err, kerr.StaleBrokerEpoch) {
			r.mu.Lock()
			r.epoch, r.fenced = -1, true
			r.mu.Unlock()
		}
		return fmt.Errorf("BrokerHeartbeat: %w", err)
	}
	r.mu.Lock()
	was := r.fenced
	r.fenced = hr.IsFenced
	r.mu.Unlock()
	if was && !hr.IsFenced {
		r.b.logger.Info("unfenced by the controller", "broker_epoch", epoch)
		if r.b.clustered() {
			// Unfenced only once the publisher applied this registration: the image is
			// no older than the log was when the node came back.
			r.b.pub.requestCleanup()
		}
	}
	return nil
}

// run heartbeats every interval until shutdown, registering again whenever needed.
func (r *registration) run() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.interval)
		err := r.joinOnce(ctx)
		if err == nil {
			err = r.heartbeat(ctx, false)
		}
		cancel()
		switch {
		case err != nil && !failing:
			r.b.logger.Warn("controller heartbeat failed; retrying", "err", err)
		case err == nil && failing:
			r.b.logger.Info("controller heartbeats work again")
		}
		failing = err != nil
	}
}

// shutdown asks the controller for a controlled shutdown (fenced, its partitions
// leaderless until it returns), then stops heartbeats and the controller.
func (r *registration) shutdown() { r.stopOnce.Do(r.doShutdown) }

func (r *registration) doShutdown() {
	close(r.stop)
	<-r.done
	if epoch, fenced := r.state(); epoch >= 0 && !fenced {
		ctx, cancel := context.WithTimeout(context.Background(), controlledShutdownWait)
		if err := r.heartbeat(ctx, true); err != nil {
			r.b.logger.Warn("controlled shutdown: the controller did not answer", "err", err)
		}
		cancel()
	}
	r.ctlCancel()
	<-r.ctlDone
	if t := r.b.ctlTransport; t != nil {
		t.Close()
	}
}
