#!/usr/bin/env bash
# Runs the tour that `make run` prints and the README's first example against
# the running `make run`, and fails on the first step that does not do what
# the docs say. Run it in a second shell while `make run` runs:
#
#   hack/tour.sh                      # make run's defaults
#   METRICS_ADDR=127.0.0.1:28080 hack/tour.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export KUBECONFIG=${KUBECONFIG:-$root/bin/local/kubeconfig}
export PATH=$root/bin/controlplane/v1.37.1:$root/bin:$PATH
metrics=${METRICS_ADDR:-127.0.0.1:18080}

step() { printf '%-60s' "$1"; }
ok() { echo "ok"; }
fail() { echo "FAILED"; echo "  $*" >&2; exit 1; }
# within SECONDS CMD...: retries CMD until it succeeds or the time is up.
within() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

command -v curl >/dev/null 2>&1 || { echo "curl is not on PATH (the tour reads /metrics with it): install it with your package manager" >&2; exit 1; }
[[ -f $KUBECONFIG ]] || { echo "no kubeconfig at $KUBECONFIG: start 'make run' first" >&2; exit 1; }
# A kubeconfig left by a make run that did not stop cleanly (killed) names
# a server that is gone.
kubectl get --raw /readyz --request-timeout=5s >/dev/null 2>&1 || { echo "the API server of $KUBECONFIG does not answer: start 'make run' first" >&2; exit 1; }

step "the sample is Ready"
kubectl wait -n vidra-system --for=condition=Ready vr/sample-app --timeout=60s >/dev/null || fail "vr/sample-app is not Ready"
kubectl get vr -A -o wide | grep -q 'sample-app.*True.*Succeeded' || fail "kubectl get vr -A -o wide does not show sample-app True Succeeded"
ok

step "kubectl vidra tree and diff show the sample"
[[ -x $root/bin/kubectl-vidra ]] || go build -o "$root/bin/kubectl-vidra" "$root/cmd/kubectl-vidra"
tree=$(kubectl vidra tree sample-app -n vidra-system) || fail "kubectl vidra tree sample-app -n vidra-system failed"
grep -q '└─Deployment/web' <<<"$tree" || fail "the tree of sample-app does not end with Deployment/web: $tree"
kubectl vidra diff sample-app -n vidra-system >/dev/null || fail "kubectl vidra diff sample-app reports differences on a fresh sample"
ok

step "a deleted ConfigMap comes back"
kubectl -n demo delete configmap web-config >/dev/null
within 10 kubectl -n demo get configmap web-config || fail "demo/web-config was not restored within 10s"
ok

step "a hand-added label is taken back"
kubectl -n demo label service web hand=made >/dev/null
no_hand_label() { ! kubectl -n demo get service web --show-labels | grep -q 'hand=made'; }
within 10 no_hand_label || fail "the label hand=made is still on demo/web after 10s"
ok

step "a tenant's resource acts as its ServiceAccount"
kubectl apply -f "$root/manifests/samples/tenant.yaml" >/dev/null
kubectl wait -n team-a --for=condition=Ready vr/team-a-web --timeout=60s >/dev/null || fail "team-a/team-a-web is not Ready"
kubectl -n team-a get configmap web-config >/dev/null || fail "team-a/web-config was not created"
ok

step "the README's first example applies beside the sample"
sed -n '/^## Using it/,/^```$/p' "$root/README.md" | sed -n '/^```yaml$/,/^```$/p' | sed '1d;$d' > "${TMPDIR:-/tmp}/vidra-tour-example.yaml"
kubectl apply -f "${TMPDIR:-/tmp}/vidra-tour-example.yaml" >/dev/null
name=$(awk '/^metadata:/ {m=1} m && /^  name:/ {print $2; exit}' "${TMPDIR:-/tmp}/vidra-tour-example.yaml")
kubectl wait -n vidra-system --for=condition=Ready "vr/$name" --timeout=60s >/dev/null || fail "the README example vr/$name is not Ready: $(kubectl -n vidra-system get vr "$name" -o wide)"
kubectl delete -f "${TMPDIR:-/tmp}/vidra-tour-example.yaml" --wait=true >/dev/null
ok

step "/metrics shows reconciles and drift corrections"
body=$(curl -sf "http://$metrics/metrics") || fail "no answer from http://$metrics/metrics"
grep -q '^vidra_reconciles_total' <<<"$body" || fail "/metrics lacks vidra_reconciles_total"
grep -q '^vidra_drift_corrections_total' <<<"$body" || fail "/metrics lacks vidra_drift_corrections_total"
ok

step "the tenant sample deletes cleanly, its namespace included"
kubectl delete -f "$root/manifests/samples/tenant.yaml" --ignore-not-found --timeout=90s >/dev/null ||
	fail "deleting manifests/samples/tenant.yaml did not finish: $(kubectl get ns team-a 2>&1; kubectl -n team-a get vr -o wide 2>&1)"
ok
echo "the tour works as written"
