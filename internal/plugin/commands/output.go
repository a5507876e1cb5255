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
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/plugin/preview"
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
		// YAML from JSON, as kubectl's YAML printer makes it, with the C1
		// controls of the JSON escaped first (see printData).
		p = &printers.JSONPrinter{}
	case "name":
		p = &printers.NamePrinter{}
	default:
		return checkOutput(output, "json", "yaml", "name")
	}
	printer := printers.NewTypeSetter(scheme.Scheme).ToPrinter(&printers.OmitManagedFieldsPrinter{Delegate: p})
	if output == "name" {
		return printer.PrintObj(obj, w)
	}
	var buf bytes.Buffer
	if err := printer.PrintObj(obj, &buf); err != nil {
		return err
	}
	return writeJSON(w, buf.Bytes(), output)
}

// writeJSON writes JSON text as -o json or yaml asks, with its C1 controls
// (U+0080 to U+009F) escaped, and in JSON the bidirectional overrides too,
// which would reorder what the terminal shows after them. A tenant can put them in any message or
// annotation a resource shows: JSON leaves them as they are, so -o json
// wrote them to the terminal, where U+009B starts a control sequence, and
// the YAML writer refuses them, so -o yaml failed on them.
func writeJSON(w io.Writer, j []byte, output string) error {
	j = preview.EscapeC1(j)
	if output == "json" {
		j = escapeBidi(j)
	}
	if output == "yaml" {
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return err
		}
		j = y
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

// escapeBidi writes the bidirectional embeddings, overrides and isolates
// (U+202A to U+202E, U+2066 to U+2069) of JSON text as escapes.
func escapeBidi(j []byte) []byte {
	return preview.EscapeRunes(j, func(r rune) bool { return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) })
}
