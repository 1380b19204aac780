package evaluator

import (
	"fmt"

	"github.com/google/cel-go/common/ast"
)

// objectConstructionErrors names each object the expression e builds (evaluator.VM{…},
// evaluator.Holders{…}): a new expression may not build one. The input's types are declared
// so that policies can read them, and building one converts every element of its list and
// map fields to Go for a constant charge — eight rules building evaluator.VM{labels: m} over
// 512 iterations ran into the deadline (issue #15, tester atk8) — while a built object's
// fields have no bound the estimate can derive (their maxSize tags bound the input only).
// Nothing a policy decides needs one: it compares and reads values.
func objectConstructionErrors(e ast.Expr) []string {
	var errs []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(n ast.Expr) {
		if n.Kind() == ast.StructKind {
			errs = append(errs, fmt.Sprintf("policies may not build objects (%s{…}): read the input's fields instead",
				n.AsStruct().TypeName()))
		}
	}))
	return errs
}
