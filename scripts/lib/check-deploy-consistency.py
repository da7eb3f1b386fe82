"""Cross-checks of the deployment files that no schema can express: they name each other (ConfigMap, Secret keys,
selectors, queue names) and the worker (its environment variables, its topology's arguments). A mistake there is
valid YAML that fails only in a cluster, or a setting the worker silently ignores.

    python3 scripts/lib/check-deploy-consistency.py [path/to/wallet-worker]
        (from the repository's root; needs PyYAML)

What the worker reads and exports is asked of the worker itself, never read out of its Swift source:
`wallet-worker settings --json` gives its environment variables and their defaults (the settings table),
`wallet-worker metrics --json` the Prometheus series it exports. The executable is the argument, else
$WALLET_WORKER_BIN, else .build/debug/wallet-worker; it must have been built (`swift build --product wallet-worker`).

Prints the failed checks (and warnings), then how many passed; exits 1 when any failed.
"""
import base64
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
from urllib.parse import urlsplit

import yaml

ROOT = pathlib.Path.cwd()
KUBERNETES = ROOT / "deploy" / "kubernetes"

failures = 0
passes = 0


def check(description, passed, detail=""):
    global failures, passes
    if passed:
        passes += 1
    else:
        failures += 1
        print(f"consistency: FAILED: {description}" + (f": {detail}" if detail else ""), file=sys.stderr)


def load(path):
    with open(path) as file:
        return yaml.safe_load(file)


def seconds(duration):
    """The worker's duration syntax (DurationText): 250ms, 5s, 10m, 24h, or a bare number of seconds."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?", str(duration))
    if not match:
        raise ValueError(f"not a duration: {duration!r}")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


# --- What the worker reads and exports: asked of the worker -----------------------------------------------------------

WORKER = pathlib.Path(
    sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WALLET_WORKER_BIN") or ".build/debug/wallet-worker")
if not (WORKER.is_file() and os.access(WORKER, os.X_OK)):
    print(f"consistency: FAILED: no wallet-worker executable at {WORKER}: build it first "
          "(swift build --product wallet-worker), or name it (argument or WALLET_WORKER_BIN)", file=sys.stderr)
    sys.exit(1)


def ask_worker(*arguments):
    """The JSON a wallet-worker command prints."""
    result = subprocess.run([str(WORKER), *arguments], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        print(f"consistency: FAILED: {WORKER} {' '.join(arguments)} exited {result.returncode}: {result.stderr.strip()}",
              file=sys.stderr)
        sys.exit(1)
    return json.loads(result.stdout)


worker_settings = {setting["variable"]: setting for setting in ask_worker("settings", "--json")}
known_variables = set(worker_settings)
check("the worker's environment variables are found (wallet-worker settings --json)", len(known_variables) > 20,
      f"found only {sorted(known_variables)}")


def default(variable):
    """A variable's default, as the worker reads it (wallet-worker settings --json)."""
    value = worker_settings[variable]["default"]
    if value is None:
        raise KeyError(f"{variable} has no default in wallet-worker settings --json")
    return value


def setting(settings, variable):
    """A variable as an environment (compose, the ConfigMap) sets it, else the worker's default."""
    return settings.get(variable, default(variable))


def check_variables(where, names):
    unknown = sorted(set(names) - known_variables)
    check(f"{where}: every variable is one the worker reads", not unknown, f"unknown: {unknown}")


# The topology's names by default, as Topology.swift declares them.
topology_defaults = {field: default(variable) for field, variable in [
    ("workQueue", "WALLET_WORK_QUEUE"), ("retryQueue", "WALLET_RETRY_QUEUE"),
    ("deadLetterQueue", "WALLET_DEAD_LETTER_QUEUE"), ("inboundExchange", "WALLET_INBOUND_EXCHANGE"),
    ("deadLetterExchange", "WALLET_DEAD_LETTER_EXCHANGE"),
]}

# --- RabbitMQ definitions ------------------------------------------------------------------------------------------

definitions = json.loads((ROOT / "deploy" / "rabbitmq" / "definitions.json").read_text())
queues = {queue["name"]: queue for queue in definitions["queues"]}
exchanges = {exchange["name"]: exchange for exchange in definitions["exchanges"]}
work_queue_name = topology_defaults["workQueue"]
for field in ["workQueue", "retryQueue", "deadLetterQueue"]:
    check(f"definitions.json has the worker's default {field} ({topology_defaults[field]})",
          topology_defaults[field] in queues)
for field in ["inboundExchange", "deadLetterExchange"]:
    check(f"definitions.json has the worker's default {field} ({topology_defaults[field]})",
          topology_defaults[field] in exchanges)
work_arguments = queues[work_queue_name]["arguments"]
retry_arguments = queues[topology_defaults["retryQueue"]]["arguments"]


def check_topology_settings(where, settings):
    """The settings that become queue arguments agree with definitions.json (else RabbitMQ answers 406)."""
    check(f"{where}: WALLET_QUEUE_TYPE is the work queue's x-queue-type",
          setting(settings, "WALLET_QUEUE_TYPE") == work_arguments.get("x-queue-type", "classic"))
    check(f"{where}: WALLET_DELIVERY_LIMIT is the work queue's x-delivery-limit",
          int(setting(settings, "WALLET_DELIVERY_LIMIT")) == work_arguments.get("x-delivery-limit"))
    check(f"{where}: WALLET_RETRY_DELAY is the retry queue's x-message-ttl",
          round(seconds(setting(settings, "WALLET_RETRY_DELAY")) * 1000) == retry_arguments.get("x-message-ttl"))
    check(f"{where}: the work queue is definitions.json's",
          settings.get("WALLET_WORK_QUEUE", work_queue_name) == work_queue_name)


# --- docker-compose.yml --------------------------------------------------------------------------------------------

compose = load(ROOT / "docker-compose.yml")
services = compose["services"]
worker_environment = {key: str(value) for key, value in services["worker"]["environment"].items()}
check("compose: declare and worker share one environment", services["declare"]["environment"] == services["worker"]["environment"])
check_variables("compose worker environment", worker_environment)
check_topology_settings("compose", worker_environment)
check("compose: three worker replicas", services["worker"].get("deploy", {}).get("replicas") == 3)
check("compose: the workers wait for the declare service to succeed",
      services["worker"]["depends_on"].get("declare", {}).get("condition") == "service_completed_successfully")
for dependency in ["rabbitmq", "postgres"]:
    check(f"compose: the workers wait for a healthy {dependency}",
          services["worker"]["depends_on"].get(dependency, {}).get("condition") == "service_healthy")
    check(f"compose: {dependency} has a healthcheck", "healthcheck" in services[dependency])
shutdown_grace = seconds(setting(worker_environment, "WALLET_SHUTDOWN_GRACE"))
check("compose: stop_grace_period is above the worker's shutdown grace",
      seconds(services["worker"].get("stop_grace_period", "10s")) > shutdown_grace)

dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
stages = set(re.findall(r"^FROM \S+ AS (\S+)", dockerfile, flags=re.MULTILINE))
for name, service in services.items():
    build = service.get("build")
    if isinstance(build, dict):
        check(f"compose: {name} builds an existing Dockerfile stage ({build.get('target')})",
              (ROOT / build["dockerfile"]).is_file() and build.get("target") in stages)
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("./"):
            check(f"compose: {name} mounts {source}, which exists", (ROOT / source).exists())

published = {pathlib.PurePosixPath(argument).name for argument in services["publish-examples"]["command"]}
examples = {path.name for path in (ROOT / "examples").glob("*.jsonl")}
check("compose: publish-examples publishes every examples/*.jsonl", published == examples,
      f"published {sorted(published)}, examples {sorted(examples)}")

# The compose broker's user (compose-users.json) is the one in AMQP_URL: its password hash is checked.
users = json.loads((ROOT / "deploy" / "rabbitmq" / "compose-users.json").read_text())["users"]
amqp = urlsplit(worker_environment["AMQP_URL"])
user = next((user for user in users if user["name"] == amqp.username), None)
if user is None:
    check(f"compose: AMQP_URL's user {amqp.username} is in compose-users.json", False)
else:
    salted = base64.b64decode(user["password_hash"])
    check("compose: AMQP_URL's password is compose-users.json's (rabbit_password_hashing_sha256)",
          user["hashing_algorithm"] == "rabbit_password_hashing_sha256"
          and hashlib.sha256(salted[:4] + amqp.password.encode()).digest() == salted[4:])
store = urlsplit(worker_environment["WALLET_STORE"])
postgres = services["postgres"]["environment"]
check("compose: WALLET_STORE is the postgres service's user, password and database",
      (store.username, store.password, store.path.lstrip("/")) ==
      (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"]))

# --- Kubernetes ----------------------------------------------------------------------------------------------------

manifests = {}
for path in sorted(KUBERNETES.glob("*.yaml")):
    document = load(path)
    manifests[document["kind"]] = document
    manifests[path.name] = document
kustomization = manifests["Kustomization"]
for resource in kustomization["resources"]:
    check(f"kustomization: {resource} exists", (KUBERNETES / resource).is_file())
unlisted = sorted(path.name for path in KUBERNETES.glob("*.yaml")
                  if path.name != "kustomization.yaml" and not path.name.endswith(".example.yaml")
                  and path.name not in kustomization["resources"])
check("kustomization: lists every manifest but the examples", not unlisted, f"not listed: {unlisted}")
check("kustomization: the example Secret is not applied", "secret.example.yaml" not in kustomization["resources"])

config_map, secret = manifests["ConfigMap"], manifests["Secret"]
deployment, job = manifests["Deployment"], manifests["declare-job.yaml"]
migrate_job = manifests["migrate-job.yaml"]
settings = config_map["data"]
check_variables("ConfigMap", settings)
check_topology_settings("ConfigMap", settings)
secret_keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
check_variables("Secret example", secret_keys)
check("Secret example: holds AMQP_URL and WALLET_STORE", {"AMQP_URL", "WALLET_STORE"} <= secret_keys)
check("Secret example: the store is PostgreSQL (replicas share it)", secret["stringData"]["WALLET_STORE"].startswith("postgres://"))

image_names = {image["name"] for image in kustomization.get("images", [])}
for workload in [deployment, job, migrate_job]:
    name = workload["metadata"]["name"]
    pod = workload["spec"]["template"]["spec"]
    for container in pod["containers"]:
        check(f"{name}: image {container['image']} is set by the kustomization's images", container["image"] in image_names)
        check(f"{name}: env from the ConfigMap {config_map['metadata']['name']}",
              any(source.get("configMapRef", {}).get("name") == config_map["metadata"]["name"] for source in container.get("envFrom", [])))
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference:
                check(f"{name}: {variable['name']} comes from the Secret's key {reference['key']}",
                      reference["name"] == secret["metadata"]["name"] and reference["key"] in secret_keys)
        check_variables(f"{name} env", [variable["name"] for variable in container.get("env", [])])
        context = container.get("securityContext", {})
        check(f"{name}: read-only root filesystem, no privilege escalation",
              context.get("readOnlyRootFilesystem") is True and context.get("allowPrivilegeEscalation") is False)
    pod_context = pod.get("securityContext", {})
    dockerfile_user = re.search(r"^USER (\d+)", dockerfile, flags=re.MULTILINE).group(1)
    check(f"{name}: runs as non-root, as the Dockerfile's user {dockerfile_user}",
          pod_context.get("runAsNonRoot") is True and str(pod_context.get("runAsUser")) == dockerfile_user)

container = deployment["spec"]["template"]["spec"]["containers"][0]
check("Deployment: terminationGracePeriodSeconds is above the shutdown grace",
      deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
      > seconds(setting(settings, "WALLET_SHUTDOWN_GRACE")))
http_port = int(setting(settings, "WALLET_HTTP_PORT"))
ports = {port["name"]: port["containerPort"] for port in container["ports"]}
check("Deployment: the container port is WALLET_HTTP_PORT", http_port in ports.values())
for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
    action = container.get(probe, {}).get("httpGet", {})
    check(f"Deployment: {probe} is GET {path} on the operations port",
          action.get("path") == path and (action.get("port") in ports or action.get("port") == http_port))
resources = container.get("resources", {})
check("Deployment: CPU and memory requests and limits",
      all(key in resources.get(kind, {}) for kind in ["requests", "limits"] for key in ["cpu", "memory"]))

template_labels = deployment["spec"]["template"]["metadata"]["labels"]
selector = deployment["spec"]["selector"]["matchLabels"]
check("Deployment: its selector matches its pods", selector.items() <= template_labels.items())
service = manifests["Service"]
check("Service: selects the worker's pods", service["spec"]["selector"].items() <= template_labels.items())
check("Service: targets the named operations port", all(port["targetPort"] in ports for port in service["spec"]["ports"]))
annotations = service["metadata"].get("annotations", {})
check("Service: Prometheus scrape annotations name the operations port and /metrics",
      annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") == str(http_port)
      and annotations.get("prometheus.io/path") == "/metrics")
budget = manifests["PodDisruptionBudget"]
check("PodDisruptionBudget: selects the worker's pods", budget["spec"]["selector"]["matchLabels"].items() <= template_labels.items())

job_container = job["spec"]["template"]["spec"]["containers"][0]
check("Job: runs wallet-worker declare", job_container.get("args") == ["declare"])
migrate_container = migrate_job["spec"]["template"]["spec"]["containers"][0]
check("Job: runs wallet-worker migrate", migrate_container.get("args") == ["migrate"])
check("migrate Job: gets WALLET_STORE", any(variable["name"] == "WALLET_STORE" for variable in migrate_container.get("env", [])))

scaled, authentication = manifests["ScaledObject"], manifests["TriggerAuthentication"]
target = scaled["spec"]["scaleTargetRef"]
check("ScaledObject: scales the Deployment", target["name"] == deployment["metadata"]["name"] and target.get("kind", "Deployment") == "Deployment")
trigger = scaled["spec"]["triggers"][0]
check("ScaledObject: its trigger watches the work queue", trigger["metadata"]["queueName"] == settings.get("WALLET_WORK_QUEUE", work_queue_name))
check("ScaledObject: its trigger authenticates with the TriggerAuthentication",
      trigger["authenticationRef"]["name"] == authentication["metadata"]["name"])
check("Deployment: sets no replicas (the HPA owns the count; apply would reset it)", "replicas" not in deployment["spec"])
check("ScaledObject: 1 <= minReplicaCount <= maxReplicaCount", 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"])
check("PodDisruptionBudget: leaves a consumer at the minimum replica count",
      budget["spec"].get("maxUnavailable", 0) < scaled["spec"]["minReplicaCount"])
for reference in authentication["spec"].get("secretTargetRef", []):
    check(f"TriggerAuthentication: {reference['parameter']} comes from the Secret's key {reference['key']}",
          reference["name"] == secret["metadata"]["name"] and reference["key"] in secret_keys)

# The NetworkPolicy and the monitoring files against the worker's pods, Service and metrics.
policy = manifests["NetworkPolicy"]
check("NetworkPolicy: selects the worker's pods", policy["spec"]["podSelector"]["matchLabels"].items() <= template_labels.items())
ingress_ports = {port["port"] for rule in policy["spec"].get("ingress", []) for port in rule.get("ports", [])}
check("NetworkPolicy: lets the probes and Prometheus reach the operations port", ingress_ports <= {http_port, "http-metrics"}
      and (http_port in ingress_ports or "http-metrics" in ingress_ports))
egress_ports = {port["port"] for rule in policy["spec"].get("egress", []) for port in rule.get("ports", [])}
check("NetworkPolicy: lets the worker reach AMQP, AMQPS, PostgreSQL and DNS", {5672, 5671, 5432, 53} <= egress_ports)

MONITORING = KUBERNETES / "monitoring"
monitoring = {}
for path in sorted(MONITORING.glob("*.yaml")):
    document = load(path)
    if isinstance(document, dict) and "kind" in document:
        monitoring[document["kind"]] = document
check("monitoring kustomization: lists every manifest",
      sorted(monitoring["Kustomization"]["resources"])
      == sorted(path.name for path in MONITORING.glob("*.yaml") if load(path).get("kind") not in (None, "Kustomization")))
monitor = monitoring["ServiceMonitor"]
check("ServiceMonitor: selects the metrics Service", monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items())
check("ServiceMonitor: scrapes the Service's port by name",
      {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} <= {port["name"] for port in service["spec"]["ports"]})

# Every wallet_* series an alert or the dashboard reads is one the worker exports (a typo would never fire).
exported = {series["name"] for series in ask_worker("metrics", "--json") if series["name"].startswith("wallet_")}
def series_names(text):
    return {re.sub(r"_(bucket|count|sum)$", "", name) for name in re.findall(r"\bwallet_[a-z_]+", text)}
check("the worker exports metrics (wallet-worker metrics --json)", len(exported) > 20, f"{sorted(exported)}")
rule_expressions = " ".join(str(rule["expr"]) for group in monitoring["PrometheusRule"]["spec"]["groups"] for rule in group["rules"])
unknown = sorted(series_names(rule_expressions) - exported)
check("PrometheusRule: every wallet_* series is one the worker exports", not unknown, f"unknown: {unknown}")


def markdown_anchors(path):
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to '-', repeats -1, -2."""
    anchors, seen, fenced = set(), {}, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


# Every alert names its runbook as FILE#ANCHOR from the repository's root: the file and the heading exist.
for group in monitoring["PrometheusRule"]["spec"]["groups"]:
    for rule in group["rules"]:
        runbook = rule.get("annotations", {}).get("runbook", "")
        file, _, anchor = runbook.partition("#")
        target = ROOT / file
        check(f"PrometheusRule: {rule['alert']}'s runbook {runbook} is a heading of a file of the repository",
              bool(file and anchor) and target.is_file() and anchor in markdown_anchors(target))

dashboard = json.loads((ROOT / "deploy" / "grafana" / "wallet-worker.json").read_text())
dashboard_expressions = " ".join(target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", []))
unknown = sorted(series_names(dashboard_expressions) - exported)
check("Grafana dashboard: every wallet_* series is one the worker exports", not unknown, f"unknown: {unknown}")

# The committed resolution (Package.resolved, the versions CI tests) covers every dependency of the manifest (the
# Dockerfile and scripts/test.sh resolve with --force-resolved-versions, which fails on a dependency the file lacks).
manifest_urls = set(re.findall(r'\.package\(\s*url:\s*"([^"]+)"', (ROOT / "Package.swift").read_text()))
pinned = {pin["location"].removesuffix(".git")
          for pin in json.loads((ROOT / "Package.resolved").read_text())["pins"]}
unpinned = sorted(url.removesuffix(".git") for url in manifest_urls if url.removesuffix(".git") not in pinned)
check("Package.resolved pins every dependency of Package.swift", manifest_urls and not unpinned,
      f"not pinned: {unpinned}")
check("the Dockerfile resolves with the committed Package.resolved only",
      "COPY Package.swift Package.resolved ./" in dockerfile and "--force-resolved-versions resolve" in dockerfile)

if failures:
    print(f"consistency: {failures} of {failures + passes} checks failed", file=sys.stderr)
    sys.exit(1)
print(f"consistency: all {passes} checks passed")
