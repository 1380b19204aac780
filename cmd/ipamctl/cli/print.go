package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Output formats of evaluate and dry-run.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func checkOutput(format string) error {
	switch format {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	if isPrinterFormat(format) {
		return nil
	}
	return usageError{fmt.Errorf("--output %q: must be table, json, yaml, name or jsonpath=TEMPLATE", format)}
}

// printResults prints one result as itself and several as a List (json, yaml), or one table
// per result.
func printResults(w io.Writer, format string, results []*dryrunv1.Evaluation) error {
	if isPrinterFormat(format) {
		return printWithPrinter(w, format, results)
	}
	if format == outputTable {
		for i, r := range results {
			if i > 0 {
				fmt.Fprintln(w)
			}
			printTable(w, &r.Status)
		}
		return nil
	}
	for _, r := range results {
		r.APIVersion, r.Kind = dryrunv1.SchemeGroupVersion.String(), dryrunv1.Kind
		r.ManagedFields = nil
	}
	var v any = results[0]
	if len(results) > 1 {
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": results}
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

func printTable(w io.Writer, r *dryrunv1.EvaluationStatus) {
	exists := "does not exist yet"
	if r.VM.Exists {
		exists = "exists"
	}
	fmt.Fprintf(w, "VirtualMachine %s/%s (%s); policies (%s): %s, then the built-in default\n\n",
		r.VM.Namespace, r.VM.Name, exists, strings.ToLower(r.Policies.Source), policyOrder(r))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tALLOCATION\tATTACHED\tIPADDRESS\tADDRESS\tREASON\tHOTPLUG\tALLOCATED BY\tSKIPPED BY\tHOTPLUG BY")
	for _, it := range r.Interfaces {
		d := it.Decision
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", interfaceName(it), orDash(string(d.Allocation)),
			yesNo(it.Attached), orDash(quoteName(it.IPAddressName)), orDash(it.Address), orDash(it.Reason), yesNo(d.Hotplug),
			orDash(d.Provenance.Allocation), skippedBy(d), orDash(d.Provenance.Hotplug))
	}
	_ = tw.Flush()
	printBudgetNotice(w, r)
	printAudit(w, r)
	printPassedOver(w, r)
	fmt.Fprintln(w, "\nActions:")
	for _, line := range actionLines(r.Actions) {
		fmt.Fprintln(w, "  "+line)
	}
	fmt.Fprintln(w, "\nOnce the virtualization controller applies the record:")
	for _, line := range appliedLines(r.Applied) {
		fmt.Fprintln(w, "  "+line)
	}
}

// printBudgetNotice says, once, that the VM's evaluation budget left interfaces undecided and
// that the dry run does not retry them: the record below is what the controller would write
// ("retried with backoff"), so the dry run's own notice is printed here.
func printBudgetNotice(w io.Writer, r *dryrunv1.EvaluationStatus) {
	n := 0
	for _, it := range r.Interfaces {
		if strings.Contains(it.Decision.Message, plan.DryRunBudgetNotice) {
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "\nNote: %d interface(s) not evaluated: the VM's evaluation budget was spent on the interfaces "+
			"before them, and the dry run does not retry (the controller would retry the VM with backoff).\n", n)
	}
}

// appliedLines is what the VM would look like once its record is applied: its launcher pods'
// networks-spec, the addresses its attached interfaces carry and the conditions built from
// the record.
func appliedLines(a dryrunv1.AppliedVM) []string {
	lines := []string{"networks-spec at the next start: " + entries(a.NextBoot)}
	if a.Running != nil {
		lines = append(lines, "networks-spec of the running launcher pods: "+entries(a.Running))
	}
	if len(a.HeldUntilRestart) > 0 {
		lines = append(lines, "held until the next restart (hotplug not allowed): "+strings.Join(a.HeldUntilRestart, ", "))
	}
	for _, n := range a.Networks {
		if n.IPAddress != "" {
			lines = append(lines, fmt.Sprintf("%s/%s: %s", n.Type, evaluator.QuoteName(n.Name), n.IPAddress))
		}
	}
	for _, c := range a.Conditions {
		lines = append(lines, fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return lines
}

// printAudit prints what the Audit-mode policies that matched would have decided, one line
// per interface and policy; nothing when none matched.
func printAudit(w io.Writer, r *dryrunv1.EvaluationStatus) {
	var rows []string
	for _, it := range r.Interfaces {
		for _, a := range it.Decision.Trace.Audit {
			allocation, skip, rule, reason := orDash(string(a.Allocation)), yesNo(a.Skip), orDash(quoteName(a.Rule)), orDash(string(a.Reason))
			if a.Error != "" {
				allocation, skip, rule, reason = "-", "-", "-", string(evaluator.ReasonPolicyError)+": "+evaluator.SafeMessage(a.Error)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\n", interfaceName(it), a.Policy, allocation, skip, rule, reason))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nAudit-mode policies (would decide, not applied):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tPOLICY\tALLOCATION\tSKIP\tRULE\tREASON")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	_ = tw.Flush()
}

// printPassedOver notes, one line each, the errors that decided nothing (a failurePolicy
// Ignore policy passed over, an Audit policy that failed: evaluator.Trace.Failures) and the
// Audit records that would decide otherwise than the decision; nothing when there are none.
func printPassedOver(w io.Writer, r *dryrunv1.EvaluationStatus) {
	var lines []string
	for _, it := range r.Interfaces {
		for _, f := range it.Decision.Trace.Failures {
			how := "failurePolicy Ignore: passed over"
			if f.Mode == v1alpha1.PolicyModeAudit {
				how = "Audit"
			}
			lines = append(lines, fmt.Sprintf("%s: policy %s (%s) failed at %s: %s", interfaceName(it), f.Policy, how,
				f.Field, evaluator.SafeMessage(f.Error)))
		}
		for _, a := range it.Decision.Trace.Audit {
			if a.Differs {
				lines = append(lines, fmt.Sprintf("%s: Audit policy %s would decide otherwise (not applied)", interfaceName(it), a.Policy))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nNote: what policies that decide nothing found:")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// interfaceName is "<Type>/<name>" as the condition and events show it (consumer.Label),
// marked when the spec no longer names the interface.
func interfaceName(it dryrunv1.InterfaceResult) string {
	label := consumer.Label(it.Type, it.Name)
	if it.Removed {
		return label + " (removed)"
	}
	return label
}

// quoteName is a name from the input (an ipAddressName, a rule name) as the table shows it:
// evaluator.QuoteName, "" kept for orDash. A name holding a line break, a tab, a terminal
// escape or a bidi override would otherwise break or disguise the table.
func quoteName(s string) string {
	if s == "" {
		return ""
	}
	return evaluator.QuoteName(s)
}

// skippedBy is the policy and rule that skipped the interface ("policy/rule"), the failing
// policy of a PolicyError, or "-".
func skippedBy(d dryrunv1.Decision) string {
	switch {
	case d.Provenance.Skip == "":
		return "-"
	case d.Rule == "":
		return d.Provenance.Skip
	}
	return d.Provenance.Skip + "/" + evaluator.QuoteName(d.Rule)
}

func actionLines(a dryrunv1.Actions) []string {
	var out []string
	for _, ip := range a.CreateIPAddresses {
		out = append(out, fmt.Sprintf("create IPAddress %s (Auto, for %s)", ip.Name, plan.InterfaceLabel(ip.Annotations[plan.AnnotationInterface])))
	}
	if a.Deferred {
		out = append(out, "then wait for SDN to answer the new IPAddresses or networks (up to 30 s; up to 10 min for a new VM's Auto IPAddresses in a backlog) before writing the record")
	}
	if a.RecordChanged && a.Record != nil {
		out = append(out, fmt.Sprintf("write the record (VirtualMachineIPAM): %s interfaces attached%s", a.Record.Summary.Attached,
			orEmpty(", first problem ", a.Record.Summary.Reason)))
	}
	for _, name := range a.DeleteIPAddresses {
		out = append(out, fmt.Sprintf("delete IPAddress %s %s after the record let it go, once nothing names it", name, plan.ReleaseGrace))
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

// orEmpty is prefix+s, or "" when s is empty.
func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func entries(list []sdnv1.NetworksSpecEntry) string {
	if len(list) == 0 {
		return "no additional interface"
	}
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = consumer.Label(e.Type, e.Name)
		if len(e.IPAddressNames) > 0 {
			names := make([]string, len(e.IPAddressNames))
			for j, n := range e.IPAddressNames {
				names[j] = evaluator.QuoteName(n)
			}
			parts[i] += " (" + strings.Join(names, ", ") + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// policyOrder is the answer's policy order; when the server left it out (a caller who may
// not list the installed policies), that it was omitted and why, from status.omitted.
func policyOrder(r *dryrunv1.EvaluationStatus) string {
	if len(r.Policies.Order) > 0 {
		return strings.Join(r.Policies.Order, ", ")
	}
	for _, o := range r.Omitted {
		if what, why, ok := strings.Cut(o, " omitted: "); ok && strings.Contains(what, "policies.order") {
			return "order omitted (" + why + ")"
		}
	}
	return "none"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
