package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/scheme"
)

// addOutput adds -o with the formats allowed, the first being the default
// ("" for the text a person reads).
func addOutput(cmd *cobra.Command, output *string, formats ...string) {
	var named []string
	for _, f := range formats {
		if f != "" {
			named = append(named, f)
		}
	}
	cmd.Flags().StringVarP(output, "output", "o", "", "Output format: one of "+strings.Join(named, "|")+".")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return named, cobra.ShellCompDirectiveNoFileComp
	})
}

// checkOutput refuses an -o the command does not support.
func checkOutput(output string, formats ...string) error {
	if slices.Contains(formats, output) {
		return nil
	}
	var named []string
	for _, f := range formats {
		if f != "" {
			named = append(named, f)
		}
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s", output, strings.Join(named, ","))
}

// printObject prints an API object as -o json, yaml or name asks, with
// its apiVersion and kind and without managedFields, as kubectl get does.
func printObject(w io.Writer, obj runtime.Object, output string) error {
	var p printers.ResourcePrinter
	switch output {
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	case "name":
		p = &printers.NamePrinter{}
	default:
		return checkOutput(output, "json", "yaml", "name")
	}
	return printers.NewTypeSetter(scheme.Scheme).ToPrinter(&printers.OmitManagedFieldsPrinter{Delegate: p}).PrintObj(obj, w)
}

// printData prints a structure of kubectl vidra's own (a tree, a diff) as
// -o json or yaml asks.
func printData(w io.Writer, v any, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return checkOutput(output, "json", "yaml")
}

// version is the module version the binary was built from: a release tag
// for `go install ...@v0.2.0`, "(devel)" for a build of a checkout.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
