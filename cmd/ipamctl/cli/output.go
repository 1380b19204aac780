package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Output formats printed by kubectl's own printers (k8s.io/cli-runtime/pkg/printers), for
// scripts: -o name prints the evaluated VMs as virtualmachine.virtualization.deckhouse.io/<name>;
// -o jsonpath=TEMPLATE and -o go-template=TEMPLATE apply the template to the result, or to a
// List of them when there are several, exactly as -o json prints them. Missing keys print
// nothing, as in kubectl.
const (
	outputName         = "name"
	outputJSONPathEq   = "jsonpath="
	outputGoTemplateEq = "go-template="
)

// isPrinterFormat reports whether cli-runtime's printers handle format.
func isPrinterFormat(format string) bool {
	return format == outputName || strings.HasPrefix(format, outputJSONPathEq) || strings.HasPrefix(format, outputGoTemplateEq)
}

// newPrinter returns the cli-runtime printer of format; a template that does not parse is a
// usage error.
func newPrinter(format string) (printers.ResourcePrinter, error) {
	if format == outputName {
		return &printers.NamePrinter{}, nil
	}
	if tmpl, ok := strings.CutPrefix(format, outputJSONPathEq); ok {
		p, err := printers.NewJSONPathPrinter(tmpl)
		if err != nil {
			return nil, usageError{fmt.Errorf("--output jsonpath: %w", err)}
		}
		p.AllowMissingKeys(true)
		return p, nil
	}
	tmpl, _ := strings.CutPrefix(format, outputGoTemplateEq)
	p, err := printers.NewGoTemplatePrinter([]byte(tmpl))
	if err != nil {
		return nil, usageError{fmt.Errorf("--output go-template: %w", err)}
	}
	p.AllowMissingKeys(true)
	return p, nil
}

// printWithPrinter prints results with the cli-runtime printer of format.
func printWithPrinter(w io.Writer, format string, results []*dryrunv1.Evaluation) error {
	printer, err := newPrinter(format)
	if err != nil {
		return err
	}
	obj, err := printable(format, results)
	if err != nil {
		return err
	}
	return printer.PrintObj(obj, w)
}

// printable is what the printer prints: for -o name a list of the evaluated VMs, else the
// result (several: a List of them) as generic JSON, which the printers accept whatever Go
// type the result has.
func printable(format string, results []*dryrunv1.Evaluation) (runtime.Object, error) {
	if format == outputName {
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
		for _, r := range results {
			vm := unstructured.Unstructured{}
			vm.SetGroupVersionKind(vmv1.GroupVersion.WithKind("VirtualMachine"))
			vm.SetNamespace(r.Status.VM.Namespace)
			vm.SetName(r.Status.VM.Name)
			list.Items = append(list.Items, vm)
		}
		return list, nil
	}
	var v any = results[0]
	if len(results) > 1 {
		v = map[string]any{"apiVersion": "v1", "kind": "List", "items": results}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	return obj, json.Unmarshal(data, &obj.Object)
}

// completeOutput offers the values of --output in shell completion.
func completeOutput(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{outputTable, outputJSON, outputYAML, outputName, outputJSONPathEq, outputGoTemplateEq}, cobra.ShellCompDirectiveNoSpace))
}
