package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	kget "k8s.io/kubectl/pkg/cmd/get"
)

// printFlags are kubectl's -o and its companion flags for a command that
// prints the objects it acted on: json, yaml, name, go-template(-file),
// template(file), jsonpath(-file), jsonpath-as-json and
// custom-columns(-file), as kubectl get has them. Without -o an object is
// printed as kubectl does after acting, "KIND/NAME OPERATION".
type printFlags struct {
	scheme    *runtime.Scheme
	generic   *genericclioptions.PrintFlags
	columns   *kget.CustomColumnsPrintFlags
	noHeaders bool
}

func newPrintFlags(operation string, scheme *runtime.Scheme) *printFlags {
	return &printFlags{
		scheme:  scheme,
		generic: genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme),
		columns: &kget.CustomColumnsPrintFlags{},
	}
}

func (p *printFlags) addFlags(cmd *cobra.Command) {
	p.generic.AddFlags(cmd)
	cmd.Flags().BoolVar(&p.noHeaders, "no-headers", false, "custom-columns: print no header line")
	if f := cmd.Flags().Lookup("output"); f != nil {
		f.Usage = "Output format: " + strings.Join(p.formats(), ", ") + "."
	}
}

func (p *printFlags) formats() []string {
	return append(p.generic.AllowedFormats(), p.columns.AllowedFormats()...)
}

// printer is the printer -o asks for, or an error naming the formats there
// are: commands call it before they change anything, so a wrong -o
// changes nothing.
func (p *printFlags) printer() (printers.ResourcePrinter, error) {
	pr, err := p.generic.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		p.columns.NoHeaders = p.noHeaders
		pr, err = p.columns.ToPrinter(*p.generic.OutputFormat)
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return nil, fmt.Errorf("--output %q: use one of %s", *p.generic.OutputFormat, strings.Join(p.formats(), ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	return unstructuredPrinter{printer: pr, scheme: p.scheme}, nil
}

// unstructuredPrinter prints an object as kubectl get does, as the
// unstructured content the API serves, so jsonpath, templates and custom
// columns see the JSON field names.
type unstructuredPrinter struct {
	printer printers.ResourcePrinter
	scheme  *runtime.Scheme
}

func (p unstructuredPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	if _, ok := obj.(runtime.Unstructured); !ok {
		gvks, _, err := p.scheme.ObjectKinds(obj)
		if err != nil {
			return err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		obj = &unstructured.Unstructured{Object: content}
	}
	return p.printer.PrintObj(obj, w)
}
