// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

const (
	// MemberLabel marks the Leases of members; the members watch only
	// those.
	MemberLabel = "vidra.infrahub.operators.com/member"
	// ViewAnnotation on a member's Lease is the hash of the view whose
	// buckets the member has taken on, and whose reconciles of buckets it
	// lost have all ended.
	ViewAnnotation = "vidra.infrahub.operators.com/view"
	// leasePrefix begins the name of every member's Lease.
	leasePrefix = "vidra-member-"
)

// Defaults of Options.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewPeriod   = 2 * time.Second
)

// Options configure a Member.
type Options struct {
	// Client reads and writes the members' Leases.
	Client kubernetes.Interface
	// Namespace holds the Leases: the operator's own.
	Namespace string
	// Identity names this member; default: the host name and a random
	// suffix, so that a restarted replica is a new member.
	Identity string
	// LeaseDuration is how long after its last renewal a member counts as
	// gone; RenewPeriod how often a member renews. A member that could not
	// renew for LeaseDuration minus twice RenewPeriod stops reconciling.
	LeaseDuration, RenewPeriod time.Duration
	// Metrics receives the member's figures; nil records none.
	Metrics *Metrics
	Clock   clock.WithTicker
}

// Listener is told of the member's share, on the member's goroutine.
type Listener interface {
	// ShardChanged is called every time a view becomes settled, with the
	// buckets this member owns in it (none while it is not a member).
	// Enter waits while it runs for a settled view, so it must not wait
	// for a reconcile.
	ShardChanged(ctx context.Context, buckets []int)
	// ShardPrepare is called when the members of a settled view that
	// missed a renewal (none seen renewing for two renew periods) change:
	// with the buckets this member would gain should they be gone, none
	// once they renewed again or left. The replica lists the objects of
	// those buckets ahead, so that taking them over when a member died
	// does not wait for the lists. It must not block.
	ShardPrepare(ctx context.Context, buckets []int)
}

// Listen has l told of the member's share; call it before Run. The
// controller that l is exists only once the member does (it asks the member
// which keys are its own), hence a call rather than an option.
func (m *Member) Listen(l Listener) { m.listener = l }

// noListener is the listener of a member nobody listens to.
type noListener struct{}

func (noListener) ShardChanged(context.Context, []int) {}
func (noListener) ShardPrepare(context.Context, []int) {}

// Member is this replica's membership. It decides which VidraResources the
// replica reconciles: Enter says so for one reconcile.
type Member struct {
	opts     Options
	listener Listener
	lease    string
	deadline time.Duration

	// gate is held for reading by every reconcile (Enter), for writing by
	// the drain of a change of view, which so waits for every reconcile
	// under the previous view to end, and by the settling of a view.
	gate sync.RWMutex

	mu       sync.Mutex
	view     []string
	viewHash string
	settled  bool
	fenced   bool
	owned    [Buckets]bool
	nOwned   int
	changeAt time.Time
	// published is the view hash this member's Lease acknowledges: a view
	// is acknowledged only once no reconcile entered under an earlier one
	// runs. changes counts changes of view, drained is the last of them
	// whose reconciles have all ended (see drain), and draining says a
	// drain is under way.
	published        string
	changes, drained uint64
	draining         bool
	// epoch ends when the member is fenced: the reconciles under way are
	// cancelled, for they must end before the others may count this member
	// gone.
	epoch    context.Context
	endEpoch context.CancelFunc

	lister    coordinationlisters.LeaseLister
	signal    chan struct{}
	lastRenew time.Time
	created   bool
	// gain is what ShardPrepare was last told, and seen when this member saw
	// each other member's latest renewal; only the member's goroutine uses
	// them.
	gain []int
	seen map[string]renewal
}

// renewal is a member's last renewal time, as its Lease says, and when
// this member saw it, by its own clock.
type renewal struct{ renewed, seen time.Time }

// New checks the options and builds a Member; Run makes it one.
func New(opts Options) (*Member, error) {
	if opts.Client == nil || opts.Namespace == "" {
		return nil, errors.New("shard: a client and the operator's namespace are required")
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.RenewPeriod == 0 {
		opts.RenewPeriod = DefaultRenewPeriod
	}
	if opts.LeaseDuration < 3*opts.RenewPeriod {
		return nil, fmt.Errorf("shard: the lease duration (%s) must be at least three renew periods (%s)", opts.LeaseDuration, opts.RenewPeriod)
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		opts.Identity = host + "-" + hex.EncodeToString(suffix)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Member{
		opts:     opts,
		listener: noListener{},
		lease:    leaseName(opts.Identity),
		deadline: opts.LeaseDuration - 2*opts.RenewPeriod,
		signal:   make(chan struct{}, 1),
	}
	m.epoch, m.endEpoch = context.WithCancel(context.Background())
	return m, nil
}

// Metrics returns the member's metrics.
func (m *Member) Metrics() *Metrics { return m.opts.Metrics }

// Identity is this member's name in views.
func (m *Member) Identity() string { return m.opts.Identity }

// leaseName turns an identity into a Lease name: lower case, and only the
// characters a name may hold.
func leaseName(identity string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(identity) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(leasePrefix+b.String(), "-.")
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

// Enter reports whether this replica reconciles key now. When it does, the
// reconcile runs with the context returned, which ends if the member is
// fenced (it could not renew its Lease), and the caller calls leave once
// the reconcile is over: a change of view waits for it.
func (m *Member) Enter(ctx context.Context, key cache.ObjectName) (_ context.Context, leave func(), ok bool) {
	m.gate.RLock()
	m.mu.Lock()
	ok = m.ownsLocked(key)
	epoch := m.epoch
	m.mu.Unlock()
	if !ok {
		m.gate.RUnlock()
		return ctx, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(epoch, cancel)
	return ctx, func() {
		stop()
		cancel()
		m.gate.RUnlock()
	}, true
}

// drain waits, off the member's goroutine, for every reconcile entered
// before the latest change of view to end, and then pokes the member,
// which acknowledges the view in its Lease. The member goes on renewing
// its Lease meanwhile: were it to wait itself, a reconcile longer than
// the Lease would let the others count it gone and take its keys over
// while that reconcile still ran.
func (m *Member) drain() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.draining {
		return
	}
	m.draining = true
	go func() {
		for {
			// Read under mu, after the change set settled to false:
			// every reconcile Enter let in before holds the gate.
			m.mu.Lock()
			target := m.changes
			m.mu.Unlock()
			m.gate.Lock()
			// Nothing to do inside: taking the gate was the wait.
			//lint:ignore SA2001 taking the write lock waits for every reconcile under the old view
			m.gate.Unlock()
			m.mu.Lock()
			m.drained = max(m.drained, target)
			done := m.changes == target
			if done {
				m.draining = false
			}
			m.mu.Unlock()
			if done {
				m.poke()
				return
			}
		}
	}()
}

// Owns reports whether key is this replica's in a settled view.
func (m *Member) Owns(key cache.ObjectName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownsLocked(key)
}

// ownsLocked is Owns, with m.mu held.
func (m *Member) ownsLocked(key cache.ObjectName) bool {
	return m.settled && !m.fenced && m.owned[Bucket(key)]
}

// View returns the members of the current view and whether it is settled.
func (m *Member) View() ([]string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.view), m.settled && !m.fenced
}

// Run joins the members, follows the view until ctx ends, then waits for
// the reconciles under way and leaves: it deletes its Lease, so that the
// others take its buckets at once rather than after the Lease duration.
func (m *Member) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("shard").WithValues("member", m.opts.Identity)
	ctx = klog.NewContext(ctx, logger)
	factory := informers.NewSharedInformerFactoryWithOptions(m.opts.Client, 0, informers.WithNamespace(m.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = MemberLabel }))
	inf := factory.Coordination().V1().Leases()
	m.lister = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.poke() },
		UpdateFunc: func(any, any) { m.poke() },
		DeleteFunc: func(any) { m.poke() },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, inf.Informer().HasSynced) {
		return ctx.Err()
	}
	logger.Info("Joining the members", "lease", m.opts.Namespace+"/"+m.lease, "leaseDuration", m.opts.LeaseDuration)

	tick := m.opts.Clock.NewTicker(m.opts.RenewPeriod)
	defer tick.Stop()
	expiry := m.opts.Clock.NewTimer(m.opts.LeaseDuration)
	defer expiry.Stop()
	m.renew(ctx)
	for {
		next := m.evaluate(ctx)
		expiry.Reset(next)
		select {
		case <-ctx.Done():
			m.leave(logger)
			return nil
		case <-tick.C():
			m.renew(ctx)
		case <-m.signal:
		case <-expiry.C():
		}
	}
}

func (m *Member) poke() {
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// leave waits for the reconciles under way, then deletes the Lease.
func (m *Member) leave(logger klog.Logger) {
	m.gate.Lock()
	m.mu.Lock()
	m.settled, m.fenced = false, true
	m.mu.Unlock()
	m.gate.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.opts.Client.CoordinationV1().Leases(m.opts.Namespace).Delete(ctx, m.lease, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Leaving the members failed; the others take this member's buckets when its Lease expires")
		return
	}
	logger.Info("Left the members")
}

// renew writes this member's Lease: its renewal time and the view it has
// taken on. A member that cannot renew for its renew deadline stops
// reconciling, before the others may count it gone.
func (m *Member) renew(ctx context.Context) {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	hash := m.published
	m.mu.Unlock()
	err := m.writeLease(ctx, now, hash)
	if err == nil {
		m.lastRenew = now
		m.mu.Lock()
		wasFenced := m.fenced
		m.fenced = false
		if wasFenced {
			m.epoch, m.endEpoch = context.WithCancel(context.Background())
		}
		m.mu.Unlock()
		if wasFenced {
			klog.FromContext(ctx).Info("Lease renewed again; rejoining")
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	if !m.lastRenew.IsZero() && now.Sub(m.lastRenew) > m.deadline {
		m.mu.Lock()
		fenced := m.fenced
		m.mu.Unlock()
		if !fenced {
			klog.FromContext(ctx).Error(err, "Could not renew the member Lease within its deadline; reconciling nothing until it is renewed", "deadline", m.deadline)
			m.mu.Lock()
			m.fenced, m.settled, m.view, m.viewHash, m.published = true, false, nil, "", ""
			m.changes++
			m.endEpoch()
			m.mu.Unlock()
			// The reconciles under way were cancelled; they end before the
			// others may count this member gone, a lease duration after its
			// last renewal, rather than when they are done.
			m.gate.Lock()
			m.mu.Lock()
			m.drained = m.changes
			m.mu.Unlock()
			m.gate.Unlock()
			m.opts.Metrics.observeOwned(0, 0)
			m.listener.ShardChanged(ctx, nil)
			m.prepare(ctx, nil, nil)
		}
		return
	}
	klog.FromContext(ctx).V(2).Info("Renewing the member Lease failed; retrying", "err", err)
}

func (m *Member) writeLease(ctx context.Context, now time.Time, hash string) error {
	leases := m.opts.Client.CoordinationV1().Leases(m.opts.Namespace)
	secs := int32(m.opts.LeaseDuration / time.Second)
	renew := metav1.NewMicroTime(now)
	if !m.created {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.lease, Labels: map[string]string{MemberLabel: "true"}, Annotations: map[string]string{ViewAnnotation: hash}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.opts.Identity), LeaseDurationSeconds: &secs,
				AcquireTime: &renew, RenewTime: &renew},
		}
		_, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if err == nil {
			m.created = true
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		m.created = true
	}
	// The cached Lease is the one this member last wrote, as a rule: a
	// renewal then costs one request. A stale one fails with a conflict,
	// and is read afresh at once.
	l, err := m.lister.Leases(m.opts.Namespace).Get(m.lease)
	cached := err == nil
	if cached {
		l = l.DeepCopy()
	} else {
		l, err = leases.Get(ctx, m.lease, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		m.created = false
		return m.writeLease(ctx, now, hash)
	}
	if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[ViewAnnotation] = hash
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To(m.opts.Identity), &secs, &renew
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if cached && apierrors.IsConflict(err) {
		fresh, gerr := leases.Get(ctx, m.lease, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		l.ResourceVersion = fresh.ResourceVersion
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	return err
}

// evaluate computes the view from the live Leases, takes a new one on, and
// settles it once every member has taken it on. It returns when to look
// again at the latest: when the next Lease expires.
func (m *Member) evaluate(ctx context.Context) time.Duration {
	now := m.opts.Clock.Now()
	next := m.opts.LeaseDuration
	all, err := m.lister.List(labels.Everything())
	if err != nil {
		return next
	}
	m.mu.Lock()
	fenced := m.fenced
	m.mu.Unlock()
	acks := map[string]string{}
	renewed := map[string]time.Time{}
	var view []string
	for _, l := range all {
		id := ptr.Deref(l.Spec.HolderIdentity, "")
		if id == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		// A member holds the Lease of its own name only: another Lease
		// naming it would make it count twice, acknowledging with
		// whichever was read last.
		if l.Name != leaseName(id) {
			continue
		}
		if id == m.opts.Identity {
			if !fenced && m.created {
				view = append(view, id)
				acks[id] = l.Annotations[ViewAnnotation]
			}
			renewed[id] = l.Spec.RenewTime.Time
			continue
		}
		// A renewal dated ahead counts from when this member first saw
		// it: dated years ahead, it kept a member that never acknowledged
		// anything in the view for years, so that no view settled, and
		// overflowed the wait for its expiry into a negative one, a loop
		// without pause. A member whose clock is ahead renews, and is
		// seen renewing, every renew period.
		renewedAt := l.Spec.RenewTime.Time
		if renewedAt.After(now) {
			renewedAt = now
			if r, ok := m.seen[id]; ok && r.renewed.Equal(l.Spec.RenewTime.Time) {
				renewedAt = r.seen
			}
		}
		expires := renewedAt.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		if !expires.After(now) {
			if now.Sub(expires) > 10*m.opts.LeaseDuration {
				// Long dead: its Lease is litter.
				_ = m.opts.Client.CoordinationV1().Leases(m.opts.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
					Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
			}
			continue
		}
		next = max(min(next, expires.Sub(now)+10*time.Millisecond), 10*time.Millisecond)
		view = append(view, id)
		acks[id] = l.Annotations[ViewAnnotation]
		renewed[id] = l.Spec.RenewTime.Time
	}
	slices.Sort(view)
	hash := viewHash(view)
	suspects, wake := m.lateMembers(now, view, renewed)
	next = min(next, wake)

	m.mu.Lock()
	changed := hash != m.viewHash
	m.mu.Unlock()
	if changed {
		// Stop reconciling under the old view at once; the view is
		// acknowledged once what runs has ended (drain).
		m.mu.Lock()
		m.view, m.viewHash, m.settled, m.changeAt = view, hash, false, now
		m.changes++
		m.mu.Unlock()
		m.drain()
		m.opts.Metrics.rebalanced(len(view))
		klog.FromContext(ctx).Info("Membership changed; handing over", "members", view)
	}

	m.mu.Lock()
	drained := m.drained == m.changes
	publish := drained && m.published != m.viewHash
	if publish {
		m.published = m.viewHash
	}
	settled := m.settled
	m.mu.Unlock()
	if publish && !fenced && slices.Contains(view, m.opts.Identity) {
		m.renew(ctx)
	}
	if changed || !drained {
		return min(next, m.opts.RenewPeriod)
	}
	if settled {
		m.prepare(ctx, view, suspects)
		return next
	}
	if !slices.Contains(view, m.opts.Identity) {
		return next
	}
	for _, id := range view {
		if acks[id] != hash {
			return min(next, m.opts.RenewPeriod)
		}
	}
	buckets := Owned(m.opts.Identity, view)
	// Reconciles wait at Enter until ShardChanged has returned, so that none
	// runs under the new view before the replica has taken its new share
	// on: its caches' scope, for one, whose old informers would answer
	// "absent" for the objects of the buckets it gains.
	m.gate.Lock()
	defer m.gate.Unlock()
	m.mu.Lock()
	m.owned = [Buckets]bool{}
	for _, b := range buckets {
		m.owned[b] = true
	}
	m.nOwned = len(buckets)
	m.settled = true
	took := now.Sub(m.changeAt)
	m.mu.Unlock()
	m.opts.Metrics.settled(took, len(view), len(buckets))
	klog.FromContext(ctx).Info("Membership settled", "members", view, "buckets", len(buckets), "took", took)
	m.listener.ShardChanged(ctx, buckets)
	m.prepare(ctx, view, suspects)
	return next
}

// lateMembers returns the members of view not seen renewing for two renew
// periods, and when to look again: when the next of the others will be
// late. renewed holds the renewal time of each member's Lease, this one's
// too. A renewal counts from when this member saw it, not from the time
// the Lease says, so that a member whose clock is behind is not suspected
// for ever. While this member has not seen its own renewal for as long,
// it suspects no one: its view of the Leases is stale (a watch that
// stalled, an API server it cannot reach), which says nothing of the
// others, and preparing their buckets would list every object they serve.
func (m *Member) lateMembers(now time.Time, view []string, renewed map[string]time.Time) ([]string, time.Duration) {
	late := 2 * m.opts.RenewPeriod
	next := m.opts.LeaseDuration
	seen := make(map[string]renewal, len(renewed))
	for id, at := range renewed {
		r, ok := m.seen[id]
		if !ok || !r.renewed.Equal(at) {
			r = renewal{renewed: at, seen: now}
		}
		seen[id] = r
	}
	m.seen = seen
	self, ok := seen[m.opts.Identity]
	if !ok || now.Sub(self.seen) >= late {
		return nil, next
	}
	next = min(next, self.seen.Add(late).Sub(now)+10*time.Millisecond)
	var suspects []string
	for _, id := range view {
		r, ok := seen[id]
		if !ok || id == m.opts.Identity {
			continue
		}
		if at := r.seen.Add(late); at.After(now) {
			next = min(next, at.Sub(now)+10*time.Millisecond)
		} else {
			suspects = append(suspects, id)
		}
	}
	return suspects, next
}

// prepare tells ShardPrepare which buckets this member would gain should the
// suspects of view be gone, when that changed. Only a settled view is
// prepared for: while a view settles, what was prepared stays, for the
// share the view brings to take on.
func (m *Member) prepare(ctx context.Context, view, suspects []string) {
	var gain []int
	if len(suspects) > 0 && slices.Contains(view, m.opts.Identity) {
		rest := slices.DeleteFunc(slices.Clone(view), func(id string) bool { return slices.Contains(suspects, id) })
		m.mu.Lock()
		owned := m.owned
		m.mu.Unlock()
		for _, b := range Owned(m.opts.Identity, rest) {
			if !owned[b] {
				gain = append(gain, b)
			}
		}
	}
	if slices.Equal(gain, m.gain) {
		return
	}
	m.gain = gain
	logger := klog.FromContext(ctx)
	if len(gain) > 0 {
		logger.Info("Members missed their Lease renewals; listing the objects of the buckets this member would take over", "members", suspects, "buckets", len(gain))
		m.opts.Metrics.preparedFor()
	} else {
		logger.V(1).Info("No member is late renewing its Lease any more; nothing to prepare")
	}
	m.listener.ShardPrepare(ctx, gain)
}

// viewHash names a view in the members' Leases.
func viewHash(view []string) string {
	if len(view) == 0 {
		return ""
	}
	h := fnv.New64a()
	for _, id := range view {
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
