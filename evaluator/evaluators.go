package evaluator

import "sync/atomic"

// Decide runs each evaluation on a goroutine of its own, so that it can stop waiting for one
// that a library call holds past the deadline. A new goroutine's stack starts small, and the
// interpreter's recursion grew it, by copying, a few times per decision: a tenth of its time.
// Evaluators therefore outlive their evaluation and wait, idle, for the next one, keeping
// their grown stacks; at most maxIdleEvaluators wait at a time, the others end.

// maxIdleEvaluators bounds the idle evaluators: as many as the controller's reconcile workers
// and dry-run requests may ask for at once, with room to spare.
const maxIdleEvaluators = 16

var (
	// evaluations hands a job to an idle evaluator (unbuffered: only one waiting takes it).
	evaluations = make(chan func())
	// idleEvaluators counts the evaluators waiting on evaluations, or about to.
	idleEvaluators atomic.Int32
	// evaluatorsStarted counts the evaluators started since the process started.
	evaluatorsStarted atomic.Int64
)

// runEvaluation runs job on an idle evaluator, or on a new one when none is waiting. It does
// not wait for job to finish.
func runEvaluation(job func()) {
	select {
	case evaluations <- job:
	default:
		evaluatorsStarted.Add(1)
		go evaluator(job)
	}
}

// evaluator runs job, then the jobs handed to it while it is idle, and ends when enough others
// are idle already.
func evaluator(job func()) {
	for {
		job()
		if idleEvaluators.Add(1) > maxIdleEvaluators {
			idleEvaluators.Add(-1)
			return
		}
		job = <-evaluations
		idleEvaluators.Add(-1)
	}
}
