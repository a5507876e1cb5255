// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package chart_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "files/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// The dashboard loads: the shape Grafana needs (a uid, a datasource
// variable, panels with ids, places and queries) and the panels of
// docs/operations.md.
func TestDashboardHasTheShapeAndThePanels(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || len(d.UID) > 40 {
		t.Errorf("title %q, uid %q: want both, the uid at most 40 bytes", d.Title, d.UID)
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Error("no datasource variable: the queries' ${datasource} resolves to nothing")
	}
	ids := map[int]bool{}
	var titles []string
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Type != "timeseries" || len(p.Targets) == 0 {
			t.Errorf("panel %q: type %q with %d queries", p.Title, p.Type, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q: a query without refId or expr", p.Title)
			}
		}
	}
	for _, want := range []string{"Reconciles by cause", "Reconciles by result", "Drift by kind", "Drift by manager", "Time to repair",
		"Queue depth", "Queue latency", "Informers by state", "Watch events", "InfrahubSync freshness", "Memory"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q; have %q", want, titles)
		}
	}
}

// Every metric the dashboard's queries and the alerts name is one a live
// operator exports: the binary runs against the control plane, reconciles
// a resource, takes back a hand edit and syncs an artifact from a stand-in
// Infrahub, and its /metrics must then list each name.
func TestDashboardAndAlertsNameOnlyExportedMetrics(t *testing.T) {
	named := map[string][]string{}
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			for _, m := range metricNames(q.Expr) {
				named[m] = append(named[m], "panel "+p.Title)
			}
		}
	}
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				named[m] = append(named[m], "alert "+r.Alert)
			}
		}
	}
	if len(named) < 20 {
		t.Fatalf("found only %d metric names in the dashboard and alerts: %v", len(named), named)
	}

	ns := "chart-metrics"
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseNamespace(ns) })
	if err := testenv.InstallCRDs(t.Context(), env.Config, filepath.Join(chartDir, "crds/infrahub.operators.com_vidraresources.yaml"),
		filepath.Join(chartDir, "crds/infrahub.operators.com_infrahubsyncs.yaml")); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "vidra.log")
	op, err := testenv.StartVidra(testenv.VidraOptions{Binary: vidraBinary, Kubeconfig: kubeconfig, Namespace: ns, LogPath: logPath,
		// The receiver on, as the install runs it: its verdicts are
		// exported from the start.
		Args: []string{"--watch-namespace=" + ns, "--allow-http-destinations", "--log-format=json", "--webhook-bind-address=127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		op.Kill()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("log of vidra (tail):\n%s", tailLines(string(data), 40))
		}
	})
	if err := op.WaitReady(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// A resource, Ready, then a hand edit it takes back: reconciles,
	// applies, drift found and corrected.
	testenv.CreateVR(t, vidra, ns, "hello", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello-vidra\ndata:\n  greeting: hello\n")
	waitReady(t, ns, "hello")
	// And one that stalls on its manifest: the status gauges report a
	// namespace only while something in it is wrong.
	testenv.CreateVR(t, vidra, ns, "broken", "apiVersion: v1\nmetadata:\n  name: no-kind\n")
	testenv.WaitVR(t, vidra, ns, "broken", "stalled", func(vr *v1alpha1.VidraResource) bool {
		return meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionStalled)
	})
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "hello-vidra", types.MergePatchType, []byte(`{"data":{"greeting":"edited"}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	// A sync of one artifact: passes, a download, the sync's status.
	s := standin.New(standin.Options{})
	s.Start()
	t.Cleanup(s.Close)
	s.AddUser("vidra", "s3cret")
	s.AddStoredQuery("ArtifactIDs", standin.ArtifactIDsQuery)
	s.SetArtifact("main", standin.Artifact{ID: "a1", Name: "device-config", Definition: "device-configs", Target: "t1", ContentType: "application/yaml",
		Content: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-infrahub\n")})
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "infrahub"},
		StringData: map[string]string{"username": "vidra", "password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Create(t.Context(), &v1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "devices", Namespace: ns},
		Spec: v1alpha1.InfrahubSyncSpec{Source: v1alpha1.InfrahubSource{InfrahubAPIURL: s.URL(), ArtefactName: "device-config",
			CredentialsSecretRef: &v1alpha1.LocalSecretReference{Name: "infrahub"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	stalled := map[string]string{"namespace": ns, "type": "Stalled", "status": "True", "reason": v1alpha1.ReasonInvalidManifest}
	var missing []string
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := op.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		missing = missing[:0]
		for m := range named {
			if _, ok := got[m]; !ok {
				missing = append(missing, m)
			}
		}
		// The stalled resource as the operator's cache holds it, not only
		// as the API server does.
		return len(missing) == 0 && got.Sum("vidra_resource_conditions", stalled) == 1, nil
	})
	if err != nil {
		slices.Sort(missing)
		for _, m := range missing {
			t.Errorf("%s, named by %v, is not on the operator's /metrics", m, named[m])
		}
	}
	got, _ := op.Metrics(t.Context())
	// The sync and the resource are what the status metrics report.
	if v := got.Sum("vidra_infrahubsync_interval_seconds", map[string]string{"namespace": ns, "name": "devices"}); v != 60 {
		t.Errorf("vidra_infrahubsync_interval_seconds of the sync = %v, want the default 60", v)
	}
	// A healthy status is counted for the cluster, a problem by namespace.
	if v := got.Sum("vidra_resource_conditions", map[string]string{"namespace": "", "type": "Ready", "status": "True"}); v < 1 {
		t.Errorf("vidra_resource_conditions counts %v Ready resources, want at least 1", v)
	}
	if v := got.Sum("vidra_resource_conditions", stalled); v != 1 {
		t.Errorf("vidra_resource_conditions counts %v stalled resources in %s, want 1", v, ns)
	}
	sync, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Get(t.Context(), "devices", metav1.GetOptions{})
	if err != nil || !meta.IsStatusConditionTrue(sync.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("the sync is not Ready (err %v): %+v", err, sync.Status.Conditions)
	}
}

var (
	// labelMatchers, ranges and grouping clauses hold label names and
	// values, not metric names.
	braces   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|"[^"]*"`)
	metricRe = regexp.MustCompile(`\b(?:vidra|workqueue|rest_client|process|go)_[a-z0-9_]+\b`)
)

// metricNames are the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	return metricRe.FindAllString(braces.ReplaceAllString(expr, " "), -1)
}
