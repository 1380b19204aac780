package plan

import (
	"context"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Plan is everything one reconcile of a VM decides and would write. The reconciler carries it
// out; the dry run returns it. Computing a Plan writes nothing.
type Plan struct {
	// Interfaces has one entry per additional interface, in spec order, then one per interface
	// removed from the spec that the running pod still carries.
	Interfaces []InterfaceResult `json:"interfaces"`
	// CreateIPAddresses are the Auto IPAddresses to create.
	CreateIPAddresses []*sdnv1.IPAddress `json:"createIPAddresses,omitempty"`
	// Record is the VM's decision record as it should be; RecordChanged says whether it
	// differs from the one observed and would be written.
	Record        *v1alpha1.VirtualMachineIPAM `json:"record"`
	RecordChanged bool                         `json:"recordChanged"`
	// Releasing are the names of the VM's Auto IPAddresses that no decision wants any more:
	// each is deleted ReleaseGrace after the record let it go, once nothing names it.
	Releasing []string `json:"releasing,omitempty"`
	// Releases are those of Releasing whose ReleaseGrace has passed and that nothing the cache
	// shows names: the reconciler deletes each that a read past the cache finds unnamed too.
	Releases []*sdnv1.IPAddress `json:"releases,omitempty"`
	// Applied is what the VM looks like once its virtualization controller applies Record
	// (consumer.Apply): the networks-spec of its next start and of its running pods, the
	// interfaces held until restart and the NetworkReady items.
	Applied consumer.Result `json:"applied"`
	// Deferred: the only problems are IPAddresses (or networks) SDN is about to answer, within their grace
	// (graceLeft) — Auto IPAddresses SDN has not allocated yet (FreshPendingGrace from their
	// creation; UnansweredGrace while SDN has not answered them at all, longer for a new VM
	// while SDN works through a backlog on the network: unansweredLeft), static IPAddresses
	// SDN has not answered at all (UnansweredGrace), and networks created less than
	// FreshPendingGrace ago that SDN has not answered at all.
	// SDN usually answers within milliseconds and the reconcile its answer triggers writes the
	// final record, so the record is written once per VM instead of once per allocation; past
	// the grace the intermediate decision is written as it is.
	Deferred bool `json:"deferred,omitempty"`
	// RetryAfter is when to look again if nothing else triggers a reconcile (with Deferred).
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	// ReleaseAfter is how long until the next ReleaseGrace that concerns the VM ends — one of
	// its Auto IPAddresses' releases, or a handoff that holds a static IPAddress back from
	// it —, 0 when none waits.
	ReleaseAfter time.Duration `json:"releaseAfter,omitempty"`

	// observed is the record as observed (nil: none), the base of the record write.
	observed *v1alpha1.VirtualMachineIPAM
	// announce are the skips new since the observed record, for Warning events.
	announce []Skip
	// late lists the interfaces whose decision ran out of wall-clock time; overBudget says
	// that the VM's evaluation budget ran out; waiting that an interface waits for a pool.
	late       []string
	overBudget bool
	waiting    bool
}

// Skip is a skipped interface's NetworkReady item as an event announces it.
type Skip struct {
	// Reason is the item's reason, Note the item as the condition holds it.
	Reason, Note string
	// Related is the interface's IPAddress, nil when it has none.
	Related *sdnv1.IPAddress
}

// Observed returns the record the plan was made from, nil when the VM had none.
func (p *Plan) Observed() *v1alpha1.VirtualMachineIPAM { return p.observed }

// Announce returns the skips new since the observed record: each deserves a Warning event once
// the record that carries it is written.
func (p *Plan) Announce() []Skip { return p.announce }

// Late returns the keys of the interfaces whose decision failed only because its wall-clock
// time ran out (the evaluator's deadline, or the VM's budget), in order.
func (p *Plan) Late() []string { return p.late }

// Retry reports whether the VM should be retried with backoff although nothing may change
// meanwhile: its evaluation budget or an evaluation's time ran out, or an interface waits for
// a pool to free up (SDN may write no event when one does).
func (p *Plan) Retry() bool { return p.overBudget || len(p.late) > 0 || p.waiting }

// Options are the knobs of Compute.
type Options struct {
	// Now is the time of the observation.
	Now time.Time
	// Evaluator are the evaluation options (Explain for a dry run).
	Evaluator evaluator.Options
	// DryRun makes the decisions left undecided for want of budget say that nothing retries
	// them, and the NetworkReady items the controller's text.
	DryRun bool
	// SDNLastAnswer, when set, tells when SDN was last seen answering an IPAddress (writing
	// the first status on it) on the network of the one given, or when the caller began to
	// watch, whichever is later (backlog.Tracker.LastAnswer); zero when unknown. A new VM's
	// unanswered Auto IPAddress waits longer while SDN answers others on its network
	// (unansweredLeft). Nil: each waits UnansweredGrace.
	SDNLastAnswer func(*sdnv1.IPAddress) time.Time
	// Created, when set, tells when an object was created on the clock Now comes from, for
	// the graces timed from a creation (firstseen.Clock.Created: its creationTimestamp, unless
	// the API server dated it after a now it was asked with — its clock runs ahead —, then
	// when it was first asked about it). Nil: the creationTimestamp, or Now for an object
	// dated after Now, every time (createdAt).
	Created func(obj metav1.Object, now time.Time) time.Time
}

// Compute observes vm's world through reader (the cache, or a cache with overlaid objects),
// decides every interface with set and plans the writes. It writes nothing; vm need not exist
// in the cluster. It fails only when reading fails or ctx ends first (the decisions are then
// incomplete and must not be acted on).
func Compute(ctx context.Context, reader client.Reader, set *evaluator.Set, vm *vmv1.VirtualMachine, opts Options) (*Plan, error) {
	observed, err := observer{reader: reader, now: opts.Now, sdnLastAnswer: opts.SDNLastAnswer, createdOn: opts.Created}.observe(ctx, vm, set)
	if err != nil {
		return nil, err
	}
	p, err := decideAndPlan(ctx, observed.clone(), opts)
	if err != nil || len(observed.pods) > 0 || !p.RecordChanged || p.Deferred || len(p.late) > 0 || p.overBudget {
		return p, err
	}
	// A stopped VM's applied state is its record, which this plan is about to change: decided
	// against the old record, the change input (and what a policy's hotplug makes of it) would
	// differ from what the next reconcile sees once the record is written — a record that is
	// not a fixed point, written again at the next event, and a dry run forever showing a
	// pending write. Decide once more against the record to be written; keep that plan when it
	// attaches the same interfaces (a policy could make the two alternate: then the first).
	again := observed.clone()
	again.nextStart = p.Record
	q, err := decideAndPlan(ctx, again, opts)
	if err != nil || !sameAttachments(p.Record, q.Record) {
		return p, nil
	}
	return q, nil
}

// decideAndPlan decides every interface of s and plans the writes.
func decideAndPlan(ctx context.Context, s *scope, opts Options) (*Plan, error) {
	cause := errVMBudget
	if opts.DryRun {
		cause = errDryRunBudget
	}
	if err := decide(ctx, s, opts.Evaluator, cause); err != nil {
		return nil, err
	}
	if opts.DryRun {
		asTheControllerWrites(s)
	}
	return plan(s), nil
}

// sameAttachments reports whether two records attach the same interfaces with the same
// allocations and IPAddresses.
func sameAttachments(a, b *v1alpha1.VirtualMachineIPAM) bool {
	key := func(r *v1alpha1.VirtualMachineIPAM) []string {
		var out []string
		if r == nil {
			return nil
		}
		for _, d := range r.Spec.Interfaces {
			if d.Attach && !d.Removed {
				out = append(out, string(d.Type)+"/"+d.Name+"/"+string(d.Allocation)+"/"+d.IPAddressName)
			}
		}
		return out
	}
	return slices.Equal(key(a), key(b))
}

// asTheControllerWrites rewrites the dry run's budget notice in the problems to the text the
// controller writes, since the record a Plan holds is what the controller would write; the
// decisions keep the dry run's own notice (nothing retries a dry run).
func asTheControllerWrites(s *scope) {
	for _, its := range [][]*iface{s.interfaces, s.removed} {
		for _, it := range its {
			if it.problem != nil {
				it.problem.message = strings.ReplaceAll(it.problem.message, errDryRunBudget.Error(), errVMBudget.Error())
			}
		}
	}
}

// plan turns the decisions into the writes: the Auto IPAddresses to create, the record, the
// releases due. Pure: a function of the scope only, which it does not change (it works on a
// copy).
func plan(observed *scope) *Plan {
	s := observed.clone()
	p := &Plan{observed: s.record, late: outOfTime(s), overBudget: s.overBudget, waiting: waitsForPool(s)}
	p.CreateIPAddresses = creates(s)
	p.Record, p.RecordChanged = record(s)
	p.Applied = consumer.Apply(consumerInput(s, p.Record))
	p.Interfaces = results(s, p.Applied)
	p.RetryAfter, p.Deferred = freshPending(s, p)
	if p.Deferred { // a deferred plan writes no record, so it must not delete either
		p.Record, p.RecordChanged = s.record, false
		return p
	}
	p.Releasing = releasing(s, p.Record)
	p.Releases, p.ReleaseAfter = releasesDue(s, p.Record)
	p.ReleaseAfter = soonest(p.ReleaseAfter, s.holdWait)
	p.announce = announce(s, p)
	return p
}

// clone copies the scope and its interfaces, so that planning can record what it decides per
// interface without changing what was observed. Objects are shared: planning never writes them.
func (s *scope) clone() *scope {
	c := *s
	c.interfaces, c.removed = cloneIfaces(s.interfaces), cloneIfaces(s.removed)
	return &c
}

// cloneIfaces copies each interface of list, its problem too.
func cloneIfaces(list []*iface) []*iface {
	out := make([]*iface, len(list))
	for i, it := range list {
		copied := *it
		if it.problem != nil {
			p := *it.problem
			copied.problem = &p
		}
		out[i] = &copied
	}
	return out
}

// waitsForPool reports whether an interface waits for its pool to free an address.
func waitsForPool(s *scope) bool {
	for _, it := range s.interfaces {
		if it.problem != nil && it.problem.reason == string(evaluator.ReasonPoolExhausted) {
			return true
		}
	}
	return false
}

// consumerInput is what a virtualization controller would know of the VM once rec is written:
// its additional interfaces with their MACs, rec, and what its running pods carry.
func consumerInput(s *scope, rec *v1alpha1.VirtualMachineIPAM) consumer.Input {
	in := consumer.Input{UID: s.vm.UID, Generation: s.vm.Generation, Record: rec, Running: len(s.pods) > 0}
	for _, it := range s.interfaces {
		in.Networks = append(in.Networks, consumer.Network{Type: string(it.spec.Type), Name: it.spec.Name, MAC: macOf(s.vm, it)})
	}
	if in.Running {
		in.Applied = appliedList(s)
		in.Decided = consumer.Decided(s.pods[0].Annotations)
	}
	return in
}

// macOf is the MAC the VM's status shows for the interface: the status.networks entry of the
// same network, matched by occurrence as the virtualization controller matches them.
func macOf(vm *vmv1.VirtualMachine, it *iface) string {
	nth := 0
	for i := 0; i < it.index && i < len(vm.Spec.Networks); i++ {
		if n := vm.Spec.Networks[i]; n.Type == it.spec.Type && n.Name == it.spec.Name {
			nth++
		}
	}
	for _, st := range vm.Status.Networks {
		if st.Type == it.spec.Type && st.Name == it.spec.Name {
			if nth == 0 {
				return st.MACAddress
			}
			nth--
		}
	}
	return ""
}

// freshPending reports whether every problem is an object SDN is about to answer, within its
// grace before s.now (graceLeft), and how long until the VM must be looked at again if no event
// brings it back sooner: when the first grace ends (the plan is then no longer deferred, and every
// problem is reported). Nothing is deferred while a change is held until restart.
func freshPending(s *scope, p *Plan) (time.Duration, bool) {
	if len(p.Applied.Held) > 0 {
		return 0, false
	}
	created := map[string]*sdnv1.IPAddress{}
	for _, ip := range p.CreateIPAddresses {
		created[ip.Name] = ip
	}
	wait, any := time.Duration(0), false
	for _, it := range s.interfaces {
		if it.problem == nil {
			continue
		}
		left, recheck := graceLeft(s, it, created)
		if left <= 0 {
			return 0, false
		}
		if !any || recheck < wait {
			wait = recheck
		}
		any = true
	}
	return wait, any
}

// FreshPendingGrace is how long a VM's record may wait for SDN to allocate its newly created
// Auto IPAddresses. UnansweredGrace applies instead while SDN has not written any status on the
// IPAddress yet: on a cold start, or when vmipam creates thousands of IPAddresses at once, its
// first answer can take longer than a fresh allocation normally does. BacklogGrace is the
// longest an unanswered Auto IPAddress waits while SDN keeps answering others (unansweredLeft).
const (
	FreshPendingGrace = 5 * time.Second
	UnansweredGrace   = 30 * time.Second
	BacklogGrace      = 10 * time.Minute
)

// graceLeft is how long the interface's problem may still wait for SDN's answer, ≤ 0 when it
// must be reported now, and when to look again if no event comes first (recheck ≥ left):
//   - IPAddressPending of its Auto IPAddress: createdLeft when this plan creates it; while SDN
//     has not written any status on it, unansweredLeft; once SDN answered it without an
//     address, FreshPendingGrace from its creation;
//   - IPAddressNotAllocated of a static IPAddress SDN has not answered at all (a user has just
//     created it, e.g. to hot-plug the interface): UnansweredGrace from its creation, as an
//     Auto IPAddress of a VM with a record. SDN answers IPAddresses in turn whoever created
//     them: 100 static ones created at once for running VMs (a GitOps sync) are a queue as
//     vmipam's are, and with FreshPendingGrace (until round 19) the last of such a burst at
//     10,000 VMs were reported IPAddressNotAllocated, with a Warning, moments before SDN
//     allocated them, and their records written twice. Once SDN answered (Pending with a
//     reason, or refused) the answer is reported as it is;
//   - NetworkNotReady of a network SDN has not answered at all (no Ready condition: an admin,
//     or a GitOps sync, has just created it with its VMs): FreshPendingGrace from its creation.
//     SDN marks it Ready a moment later; reported at once, the skip cost a record write, a
//     Warning and a NetworkReady False that were stale by then, and a second record write. A
//     network SDN reports not Ready is reported as it is.
func graceLeft(s *scope, it *iface, created map[string]*sdnv1.IPAddress) (left, recheck time.Duration) {
	switch it.problem.reason {
	case string(evaluator.ReasonIPAddressPending):
		if ip := created[it.autoName]; ip != nil {
			return createdLeft(s, ip)
		}
		if it.auto == nil {
			return 0, 0
		}
		if unanswered(it.auto) {
			return unansweredLeft(s.now, s.createdAt(it.auto), backlogEvidence(s, it.auto))
		}
		left := FreshPendingGrace - s.now.Sub(s.createdAt(it.auto))
		return left, left
	case string(evaluator.ReasonIPAddressNotAllocated):
		if it.static == nil || !unanswered(it.static) {
			return 0, 0
		}
		// Not the backlog rule: a user's IPAddress may be older than the VM, SDN answering
		// others since does not show it queued, and the stall notice (controller/vm,
		// vmsWaitingForSDN) wakes only the VMs that own an unanswered IPAddress.
		return unansweredLeft(s.now, s.createdAt(it.static), time.Time{})
	case string(evaluator.ReasonNetworkNotReady):
		if it.network == nil || !it.network.exists || it.network.answered {
			return 0, 0
		}
		left := FreshPendingGrace - s.now.Sub(it.network.created)
		return left, left
	}
	return 0, 0
}

// createdAt is when obj was created, on the clock of now: what createdOn says (Options.Created),
// or without it the creationTimestamp, which the API server stamps from its own clock, or now
// when that lies after now — only a clock running ahead of the controller's makes it
// possible. Without either, every grace timed from a creation would also last the skew (an
// hour ahead: an hour). A clock running behind shortens the graces instead, which costs
// writes, not availability: the problem is reported early, the VM starts without the
// interface and gets it hot-plugged when SDN answers (docs/RELIABILITY.md, "Clock skew").
func createdAt(obj metav1.Object, now time.Time, createdOn func(metav1.Object, time.Time) time.Time) time.Time {
	if createdOn != nil {
		return createdOn(obj, now)
	}
	if created := obj.GetCreationTimestamp().Time; !created.After(now) {
		return created
	}
	return now
}

// createdAt is createdAt on the scope's clock.
func (s *scope) createdAt(obj metav1.Object) time.Time { return createdAt(obj, s.now, s.createdOn) }

// createdLeft is graceLeft for an Auto IPAddress this plan creates, which SDN cannot have
// answered yet: it waits as any unanswered one does from its creation (unansweredLeft),
// UnansweredGrace. Its recheck is UnansweredGrace too, unless SDN answered on its network
// within UnansweredGrace before now (for a new VM only: backlogEvidence): SDN is then working
// through a queue the address joins, and the recheck is the cap, BacklogGrace, as for an
// unanswered address SDN answered others after — its answer, or the stall notice if SDN falls
// quiet, brings the VM back sooner. Until round 15 the recheck was FreshPendingGrace, and
// whenever SDN took longer than that (every VM of a backlog) the reconcile it brought found
// the address unanswered and deferred again: one reconcile per VM that could change nothing.
func createdLeft(s *scope, ip *sdnv1.IPAddress) (left, recheck time.Duration) {
	if last := backlogEvidence(s, ip); !last.IsZero() && s.now.Sub(last) < UnansweredGrace {
		return UnansweredGrace, BacklogGrace
	}
	return UnansweredGrace, UnansweredGrace
}

// backlogEvidence is when SDN was last seen answering on ip's network, for a new VM (no record
// yet) only; zero otherwise. A VM with a record keeps UnansweredGrace: deferring its record
// would hold back every other change of it (an interface removed or switched to another
// network, a sibling allocated meanwhile) for as long as the backlog lasts, while a new VM
// without a record starts without its additional interfaces anyway (docs/INTEGRATION.md, rule
// 1: every one is DecisionPending until the first record).
func backlogEvidence(s *scope, ip *sdnv1.IPAddress) time.Time {
	if s.record != nil || s.sdnLastAnswer == nil {
		return time.Time{}
	}
	return s.sdnLastAnswer(ip)
}

// unansweredLeft is graceLeft for an Auto IPAddress created at created that SDN has not answered
// yet, lastAnswer being when SDN was last seen answering an IPAddress of its network or when the
// caller began to watch, whichever is later (after a restart an address created before it waits
// until UnansweredGrace after the sync), zero when unknown or not to be used (backlogEvidence).
// SDN is quiet on the network (no answer since
// created): UnansweredGrace from the creation, so a stopped SDN, or a network whose IPAM SDN does
// not serve, is reported within it. SDN answers others on the network but not this one yet: it is
// working through a backlog (thousands of VMs created at once), and the address is in its queue; it
// waits until SDN has been quiet on the network for UnansweredGrace, at most BacklogGrace from its
// creation. Skipping it earlier would help nobody — without the record the virtualization
// controller starts the VM without the interface and reports it pending anyway — and would cost a
// record write now and another at the answer (each applied to the pod and the VM's status again),
// plus a Warning event, for every queued address: more work for an API server and an SDN already
// behind. recheck is then the cap, since an answer of its own or SDN falling quiet (the stall
// notice the reconciler subscribes to) brings the VM back sooner.
func unansweredLeft(now, created, lastAnswer time.Time) (left, recheck time.Duration) {
	deadline := created.Add(UnansweredGrace)
	if !lastAnswer.After(created) {
		return deadline.Sub(now), deadline.Sub(now)
	}
	limit := created.Add(BacklogGrace)
	if quiet := lastAnswer.Add(UnansweredGrace); quiet.After(deadline) {
		deadline = quiet
	}
	if deadline.After(limit) {
		deadline = limit
	}
	return deadline.Sub(now), limit.Sub(now)
}

// unanswered: SDN has not written any status on the IPAddress yet.
func unanswered(ip *sdnv1.IPAddress) bool { return !ip.Status.Answered() }
