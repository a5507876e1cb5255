// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package chart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readAlerts(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	data, err := os.ReadFile(filepath.Join(chartDir, "files/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

// Every alert provably fires on the recorded series of its fault and stays
// quiet on those of the nearest healthy case (testdata/alerts_test.yaml),
// and the rules pass promtool's checks.
func TestAlertsFireAndStayQuiet(t *testing.T) {
	promtool := tool(t, "promtool")
	rules := filepath.Join(chartDir, "files/alerts.yaml")
	if out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", filepath.Join("testdata", "alerts_test.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// Each alert has a case that fires and a case that checks silence
	// (an evaluation expecting no alert, or series of a healthy case
	// beside the firing ones in the same test).
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &suite); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range suite.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
				// More series than alerts expected: some stayed quiet.
				if len(tc.InputSeries) > len(a.ExpAlerts) {
					quiet[a.Alertname] = true
				}
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	runbook, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a firing case %v, a quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("alert %s lacks a summary or a severity", r.Alert)
			}
			anchor := strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "docs/operations.md#"+anchor) ||
				!regexp.MustCompile(`(?m)^#+ `+r.Alert+`$`).Match(runbook) {
				t.Errorf("alert %s: no runbook section %q in docs/operations.md, or runbook_url %q does not point to it", r.Alert, r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
}

// The chart's PrometheusRule and manifests/monitoring's hold the same
// rules, and the dashboard is the same file in both.
func TestMonitoringOfBothInstallsMatches(t *testing.T) {
	want := readAlerts(t)
	var chartRule, kustomizeRule struct {
		Spec ruleFile `json:"spec"`
	}
	objs := byKey(t, template(t, "--set", "metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true"))
	rule := objs["PrometheusRule vidra-system/vidra"]
	if rule == nil {
		t.Fatalf("the chart renders no PrometheusRule: %v", keys(objs))
	}
	data, _ := yaml.Marshal(rule.Object)
	if err := yaml.Unmarshal(data, &chartRule); err != nil {
		t.Fatal(err)
	}
	ks := byKey(t, kustomize(t, "manifests/monitoring"))
	data, _ = yaml.Marshal(ks["PrometheusRule vidra-system/vidra"].Object)
	if err := yaml.Unmarshal(data, &kustomizeRule); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(chartRule.Spec, want) {
		t.Error("the chart's PrometheusRule does not hold charts/vidra/files/alerts.yaml")
	}
	if !reflect.DeepEqual(kustomizeRule.Spec, want) {
		t.Error("manifests/monitoring/prometheusrule.yaml does not hold the rules of charts/vidra/files/alerts.yaml")
	}
	dashboard, _ := os.ReadFile(filepath.Join(chartDir, "files/dashboard.json"))
	for what, cm := range map[string]map[string]any{"chart": objs["ConfigMap vidra-system/vidra-dashboard"].Object, "manifests/monitoring": ks["ConfigMap vidra-system/vidra-dashboard"].Object} {
		data, _ := cm["data"].(map[string]any)
		if strings.TrimSpace(data["vidra.json"].(string)) != strings.TrimSpace(string(dashboard)) {
			t.Errorf("the dashboard ConfigMap of %s is not charts/vidra/files/dashboard.json", what)
		}
	}
}
