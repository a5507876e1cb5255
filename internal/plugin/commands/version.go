// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/vidra-operator/vidra/internal/plugin/render"
)

// versionInfo is what version prints with -o json or yaml.
type versionInfo struct {
	ClientVersion string `json:"clientVersion"`
	GoVersion     string `json:"goVersion"`
	Platform      string `json:"platform"`
	ServerVersion string `json:"serverVersion,omitempty"`
}

func newVersion(r *root) *cobra.Command {
	var (
		clientOnly bool
		output     string
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl vidra and of the cluster's API server",
		Example: `  kubectl vidra version
  kubectl vidra version --client -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml"); err != nil {
				return err
			}
			info := versionInfo{ClientVersion: version(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if !clientOnly {
				c, err := r.clients()
				if err != nil {
					return err
				}
				sv, err := c.kube.Discovery().ServerVersion()
				if err != nil {
					return fmt.Errorf("read the API server's version (--client skips it): %w", err)
				}
				info.ServerVersion = sv.GitVersion
			}
			if output != "" {
				return printData(r.streams.Out, info, output)
			}
			fmt.Fprintf(r.streams.Out, "Client Version: %s (%s, %s)\n", render.Safe(info.ClientVersion), info.GoVersion, info.Platform)
			if info.ServerVersion != "" {
				// The API server says what it likes.
				fmt.Fprintf(r.streams.Out, "Server Version: %s\n", render.Safe(info.ServerVersion))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the client version only, without contacting the cluster.")
	addOutput(cmd, &output, "", "json", "yaml")
	return cmd
}
