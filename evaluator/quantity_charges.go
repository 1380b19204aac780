package evaluator

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// quantityOpCost is what one Quantity operation — add, sub, compareTo, isGreaterThan,
// isLessThan, sign, isInteger, asInteger, asApproximateFloat — is charged, statically and at
// run time: the library charges 1, but the operands are arbitrary-precision decimals of up to
// ~130 digits within the guarded exponents (quantity('1e64').add(quantity('1e-64'))), which
// each operation rescales: one policy of add/sub/isInteger loops spent 317-346 ms for
// 279,006 units (~1.2 µs a unit, atk15b finding 8). BenchmarkCostCalibration
// "quantity-arithmetic" measures the charge.
const quantityOpCost = 4

// quantityOps are the Quantity overloads charged quantityOpCost.
var quantityOps = []string{
	"quantity_sign", "quantity_is_greater_than", "quantity_is_less_than", "quantity_compare_to",
	"quantity_get_float", "quantity_get_int", "quantity_is_integer",
	"quantity_add", "quantity_add_int", "quantity_sub", "quantity_sub_int",
}

// quantityOpEstimate is the static charge of a Quantity operation.
var quantityOpEstimate = &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: quantityOpCost}}

// isQuantityOp reports whether overloadID is one of quantityOps.
func isQuantityOp(overloadID string) bool {
	for _, id := range quantityOps {
		if id == overloadID {
			return true
		}
	}
	return false
}

// quantityCostTrackers charges each Quantity operation quantityOpCost at run time.
func quantityCostTrackers() cel.ProgramOption {
	var opts []interpreter.CostTrackerOption
	for _, id := range quantityOps {
		opts = append(opts, interpreter.OverloadCostTracker(id, func([]ref.Val, ref.Val) *uint64 {
			cost := uint64(quantityOpCost)
			return &cost
		}))
	}
	return cel.CostTrackerOptions(opts...)
}
