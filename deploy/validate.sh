#!/usr/bin/env bash
# Validates the deployment files without a container engine or a cluster:
#  * every Kubernetes overlay rendered with `kubectl kustomize` and every object checked
#    against the schemas of Kubernetes $K8S_VERSION (kubernetes-validate, strict: unknown
#    fields fail); CRD objects (the ServiceMonitor) have no schema there and are reported;
#  * docker-compose.yml against the Compose specification's schema (check-jsonschema).
# The tools: kubectl (Debian: kubernetes-client), `pip install kubernetes-validate
# check-jsonschema` (.ci/run installs them). Consistency with the configuration schema and
# the services' ports is tests/e2e/deploy.rs in kplane-cli.
set -euo pipefail
cd "$(dirname "$0")/.."
K8S_VERSION="${K8S_VERSION:-1.31.0}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for overlay in deploy/k8s/overlays/*/; do
  name=$(basename "$overlay")
  kubectl kustomize "$overlay" >"$out/$name.yaml" 2>"$out/$name.err" || { cat "$out/$name.err" >&2; exit 1; }
  echo "deploy/k8s/overlays/$name: $(grep -c '^kind:' "$out/$name.yaml") objects rendered"
  kubernetes-validate --kubernetes-version "$K8S_VERSION" --strict --quiet "$out/$name.yaml"
done
check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml
echo "deployment files valid (Kubernetes $K8S_VERSION, Compose specification)"
