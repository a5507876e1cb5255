// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command infrahub-standin serves the stand-in Infrahub
// (internal/infrahub/standin) on an address, with artifacts read from
// files, so that `make run` can show an InfrahubSync at work without an
// Infrahub. It re-reads the files every --reload: editing one changes its
// artifact (new checksum and storage id), removing one deletes it.
//
//	go run ./hack/infrahub-standin --addr 127.0.0.1:18000 \
//	  --artifact-name vidra-sample \
//	  --artifact sample-a=manifests/samples/a.yaml --artifact sample-b=manifests/samples/b.yaml
//
// It logs in admin / infrahub (Infrahub's own defaults) unless told
// otherwise, accepts --token as X-INFRAHUB-KEY, and prints its URL once it
// serves. With --webhook-url it posts each artifact change there, signed
// with --webhook-shared-key as Infrahub's CoreStandardWebhook does
// (--webhook-signing picks the Infrahub version's form). Ctrl-C stops it.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

// artifactFlags collects --artifact ID=PATH.
type artifactFlags []fileArtifact

type fileArtifact struct{ id, path string }

func (a *artifactFlags) String() string { return fmt.Sprint(*a) }

func (a *artifactFlags) Set(v string) error {
	id, path, ok := strings.Cut(v, "=")
	if !ok || id == "" || path == "" {
		return errors.New("want ID=PATH")
	}
	*a = append(*a, fileArtifact{id: id, path: path})
	return nil
}

type options struct {
	addr, user, password, token, name, branch, certOut string
	webhookURL, webhookKey, webhookSigning             string
	tls, webhookInsecure                               bool
	accessLifetime, reload                             time.Duration
	artifacts                                          artifactFlags
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:18000", "the address to serve on")
	flag.StringVar(&o.user, "username", "admin", "the account that logs in")
	flag.StringVar(&o.password, "password", "infrahub", "its password")
	flag.StringVar(&o.token, "token", "", "an API token accepted as X-INFRAHUB-KEY; empty adds none")
	flag.StringVar(&o.name, "artifact-name", "vidra-sample", "the name every artifact carries (the definition's artifact_name)")
	flag.StringVar(&o.branch, "branch", standin.DefaultBranch, "the branch the artifacts are on")
	flag.Var(&o.artifacts, "artifact", "ID=PATH: an artifact with that id whose content is the file (YAML or JSON, by its extension); repeat for more")
	flag.BoolVar(&o.tls, "tls", false, "serve https with a self-signed certificate")
	flag.StringVar(&o.certOut, "cert-out", "", "with --tls, write the certificate (PEM) there, for an InfrahubSync's caSecretRef")
	flag.DurationVar(&o.accessLifetime, "access-token-lifetime", standin.DefaultAccessLifetime, "the life of an access token")
	flag.DurationVar(&o.reload, "reload", time.Second, "how often the files are read again")
	flag.StringVar(&o.webhookURL, "webhook-url", "", "post every artifact change there, as a CoreStandardWebhook of node_kind CoreArtifact; empty sends none")
	flag.StringVar(&o.webhookKey, "webhook-shared-key", "", "the webhook's shared_key")
	flag.StringVar(&o.webhookSigning, "webhook-signing", "compact", "compact (Infrahub ≥ 1.7.5), spaced (1.2.10–1.6.x) or 1.7.0 (1.7.0–1.7.4: signed spaced, sent compact)")
	flag.BoolVar(&o.webhookInsecure, "webhook-insecure-skip-verify", false, "do not verify the receiver's certificate (the webhook's validate_certificates: false), for a self-signed one")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "infrahub-standin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if len(o.artifacts) == 0 {
		return errors.New("no --artifact given")
	}
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	s := standin.New(standin.Options{TLS: o.tls, Listener: l, AccessLifetime: o.accessLifetime, DefaultBranch: o.branch})
	s.AddUser(o.user, o.password)
	if o.webhookURL != "" {
		signing, err := standin.ParseSigning(o.webhookSigning)
		if err != nil {
			return err
		}
		client := &http.Client{Timeout: 10 * time.Second}
		if o.webhookInsecure {
			client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the webhook's validate_certificates: false, asked for by flag
		}
		s.AddWebhook(standin.Webhook{URL: o.webhookURL, SharedKey: o.webhookKey, Branch: o.branch, Signing: signing, Client: client, RetryDelay: 10 * time.Second})
	}
	if o.token != "" {
		s.AddToken(o.token)
	}
	present := map[string]bool{}
	if err := load(s, o, present); err != nil {
		return err
	}
	s.Start()
	defer s.Close()
	if o.tls && o.certOut != "" {
		if err := os.WriteFile(o.certOut, s.CertPEM(), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("stand-in Infrahub serving at %s (user %s, %d artifacts named %q on branch %s)\n", s.URL(), o.user, len(present), o.name, o.branch)
	fmt.Println("edit an artifact's file to change it; remove the file to delete it")
	tick := time.NewTicker(o.reload)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := load(s, o, present); err != nil {
				fmt.Fprintln(os.Stderr, "infrahub-standin:", err)
			}
		}
	}
}

// load (re)reads the artifacts' files into s: a changed file is a new
// version (SetArtifact changes nothing when the content is the same), a
// removed one deletes its artifact. present tracks which are stored.
func load(s *standin.Server, o options, present map[string]bool) error {
	var errs []error
	for _, a := range o.artifacts {
		content, err := os.ReadFile(a.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if present[a.id] {
				s.DeleteArtifact(o.branch, a.id)
				delete(present, a.id)
				fmt.Printf("artifact %s deleted (%s is gone)\n", a.id, a.path)
			}
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		before, existed := s.GetArtifact(o.branch, a.id)
		after := s.SetArtifact(o.branch, standin.Artifact{ID: a.id, Name: o.name, ContentType: contentType(a.path), Content: content})
		present[a.id] = true
		if existed && before.Checksum != after.Checksum {
			fmt.Printf("artifact %s changed: checksum %s, storage id %s\n", a.id, after.Checksum, after.StorageID)
		}
	}
	return errors.Join(errs...)
}

// contentType is the artifact's content type by its file's extension, as an
// artifact definition declares it.
func contentType(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	}
	return "text/plain"
}
