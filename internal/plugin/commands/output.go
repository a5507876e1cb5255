// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/vidra-operator/vidra/internal/plugin/render"
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
	case "json", "yaml":
		// YAML from JSON, as kubectl's YAML printer makes it, with the
		// runes a terminal acts on escaped (see writeJSON).
		p = &printers.JSONPrinter{}
	case "name":
		p = &printers.NamePrinter{}
	default:
		return checkOutput(output, "json", "yaml", "name")
	}
	printer := printers.NewTypeSetter(scheme.Scheme).ToPrinter(&printers.OmitManagedFieldsPrinter{Delegate: p})
	var buf bytes.Buffer
	if err := printer.PrintObj(obj, &buf); err != nil {
		return err
	}
	if output == "name" {
		// The API server checks the names of most kinds, not of all:
		// escaped as any other text the cluster sends.
		_, err := io.WriteString(w, render.SafeText(buf.String()))
		return err
	}
	return writeJSON(w, buf.Bytes(), output)
}

// writeJSON writes JSON text as -o json or yaml asks, with every rune a
// terminal would act on (render.Escaped: controls, format characters such
// as the bidirectional overrides and the zero-width ones, separators)
// written as an escape of the format: \u202e in JSON, a double-quoted
// scalar with \u202e in YAML. A tenant can put them in any message or
// annotation a resource shows; the output reads back as the same value.
func writeJSON(w io.Writer, j []byte, output string) error {
	if output == "yaml" {
		y, err := render.JSONToYAML(j)
		if err != nil {
			return err
		}
		j = y
	} else {
		j = render.EscapeJSON(j)
	}
	_, err := w.Write(j)
	return err
}

// printData prints a structure of kubectl vidra's own (a tree, a diff) as
// -o json or yaml asks.
func printData(w io.Writer, v any, output string) error {
	switch output {
	case "json", "yaml":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		return writeJSON(w, append(b, '\n'), output)
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

// warnings prints the warnings of API server answers as kubectl does,
// "Warning: <text>" on stderr, escaped: an admission webhook's warning may
// quote what a tenant wrote, and client-go's default handler logs it as
// it is.
type warnings struct{ w io.Writer }

// HandleWarningHeader implements rest.WarningHandler.
func (h warnings) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	fmt.Fprintf(h.w, "Warning: %s\n", render.OneLine(text))
}
