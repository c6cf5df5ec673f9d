"""The compose file's monitoring profile (docker/compose.yaml, docker/monitoring/) as files: the
Grafana dashboard has the panels the issue asks for, well-formed; the alert rules match what the
processes count; the profile's services, mounts and scrape targets fit the compose file; the rules
and the config pass `promtool check` where promtool is installed, and `docker compose --profile
monitoring config` reads the file where compose is (the plugin, or docker-compose 1.29).

Also the readers of those files (the PromQL expressions of the dashboard and the rules, and the
metric names they select) that test_monitoring_exports.py holds against the real processes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from tests.deploy.test_compose import DOCKER, ROOT, compose

MONITORING = DOCKER / "monitoring"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "animegamer.json"
RULES = MONITORING / "rules.yml"
PROMETHEUS = MONITORING / "prometheus.yml"
DATASOURCES = MONITORING / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROVIDERS = MONITORING / "grafana" / "provisioning" / "dashboards" / "dashboards.yml"


# --- what the dashboard and the rules use

_KEYWORDS = frozenset({
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "inf", "nan",
})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NUMBER = re.compile(r"(?<![\w:])\d[\w.]*(?:[eE][+-]?\d+)?")  # 0.95, 1e3, 15, and durations: 5m, 1h30m
_IDENTIFIER = re.compile(r"[A-Za-z_:][\w:]*")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: its identifiers once strings, Grafana's
    variables, label matchers, ranges, grouping label lists, numbers and durations are gone, and
    that are neither followed by `(` (functions, aggregations) nor keywords."""
    e = _STRING.sub('""', expr)
    e = _GRAFANA_VARIABLE.sub(" ", e)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = _GROUPING.sub(" ", e)
    e = _NUMBER.sub(" ", e)
    names = set()
    for m in _IDENTIFIER.finditer(e):
        if e[m.end():].lstrip().startswith("(") or m.group(0).lower() in _KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def base_name(series: str) -> str:
    """A histogram's (or summary's) series name without its _bucket/_count/_sum suffix."""
    return re.sub(r"_(?:bucket|count|sum)$", "", series)


def _panels(panels: list[dict]) -> Iterator[dict]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # a collapsed row holds its panels


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard, its query variables' included."""
    d = dashboard()
    out = [(p["title"], t["expr"]) for p in _panels(d["panels"]) for t in p.get("targets", []) if t.get("expr")]
    for var in d.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var.get("query")
        query = (query.get("query") if isinstance(query, dict) else query) or ""
        # label_values(expr, label) and query_result(expr) hold PromQL; label_values(label) none.
        m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query) or re.fullmatch(r"\s*query_result\((.*)\)\s*", query)
        if m:
            out.append((f"variable {var['name']}", m.group(1)))
    return out


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def rule_expressions() -> list[tuple[str, str]]:
    return [(f"alert {r.get('alert') or r.get('record')}", r["expr"]) for r in rules()]


# --- the tokenizer itself


@pytest.mark.parametrize("expr, names", [
    ("up", {"up"}),
    ('up{job="worker"} == 0', {"up"}),
    ("histogram_quantile(0.95, sum by (le, film) (rate(animegamer_stage_seconds_bucket[$__rate_interval])))",
     {"animegamer_stage_seconds_bucket"}),
    ('sum(rate(a_total{result="hit"}[5m])) / sum(rate(a_total[5m])) > 0.5e1', {"a_total"}),
    ("sum(rate(x_total[5m] offset 1h)) by (le) * 60", {"x_total"}),
    ('max by (film) (q{film=~"qi.*", x!="by (y)"}) > 15 * 60 and on (film) z unless ignoring(a) w', {"q", "z", "w"}),
    ("max_over_time(g[1h:5m]) or vector(0)", {"g"}),
    ("rate(c_total[${interval}]) > bool 1", {"c_total"}),
])
def test_promql_names(expr, names):
    assert promql_metric_names(expr) == names


def test_histogram_suffixes_name_their_family():
    assert base_name("animegamer_bot_ack_seconds_bucket") == "animegamer_bot_ack_seconds"
    assert base_name("animegamer_turn_seconds_count") == "animegamer_turn_seconds"
    assert base_name("animegamer_queue_depth") == "animegamer_queue_depth"


# --- the dashboard and the rules


def test_the_dashboard_has_every_panel_the_issue_asks_for():
    d = dashboard()
    panels = [p for p in _panels(d["panels"]) if p.get("type") != "row"]
    by_metric: dict[str, list[str]] = {}
    for p in panels:
        for t in p.get("targets", []):
            for name in promql_metric_names(t["expr"]):
                by_metric.setdefault(base_name(name), []).append(t["expr"])

    def uses(metric: str, *fragments: str) -> bool:
        return any(all(f in e for f in fragments) for e in by_metric.get(metric, []))

    assert uses("animegamer_queue_depth", "film")
    assert uses("animegamer_queue_oldest_seconds", "film")
    assert uses("animegamer_turns_total", "rate(", "* 60")  # turns per minute
    assert uses("animegamer_stage_seconds", "histogram_quantile(0.5", "stage")
    assert uses("animegamer_stage_seconds", "histogram_quantile(0.95", "stage")
    for gpu in ("animegamer_gpu_memory_allocated_bytes", "animegamer_gpu_memory_reserved_bytes", "animegamer_turn_gpu_peak_bytes"):
        assert uses(gpu), gpu
    assert uses("animegamer_bot_post_lag_seconds", "histogram_quantile(0.95")
    assert uses("animegamer_bot_ack_seconds", "histogram_quantile(0.5")
    assert uses("animegamer_bot_ack_seconds", "histogram_quantile(0.99")
    assert uses("animegamer_bot_interactions_total", "outcome")  # errors: interactions by outcome
    assert uses("animegamer_turns_total", 'status="failed"')  # errors: failed turns
    assert uses("animegamer_bot_gateway_latency_seconds", "") and any(
        "shard" in t.get("legendFormat", "") for p in panels for t in p.get("targets", []) if "gateway_latency" in t["expr"])
    assert uses("animegamer_play_sse_clients")

    # Well-formed: unique ids and refIds, on the 24-column grid, on the provisioned datasource.
    ids = [p["id"] for p in _panels(d["panels"])]
    assert len(ids) == len(set(ids))
    uid = yaml.safe_load(DATASOURCES.read_text())["datasources"][0]["uid"]
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        assert p["datasource"]["uid"] == uid, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and all(t["datasource"]["uid"] == uid for t in p["targets"]), p["title"]
    assert d["uid"] and d["title"]


def test_the_alert_rules():
    by_name = {r["alert"]: r for r in rules()}
    assert {"WorkerDown", "QueueStuck", "PostingLag", "DatabaseDown", "TurnFailures", "AckSlow"} <= set(by_name)
    assert by_name["WorkerDown"]["expr"] == 'up{job="worker"} == 0' and by_name["WorkerDown"]["for"] == "2m"
    assert by_name["DatabaseDown"]["expr"] == "animegamer_database_up == 0" and by_name["DatabaseDown"]["for"] == "1m"
    assert "animegamer_queue_oldest_seconds" in by_name["QueueStuck"]["expr"] and by_name["QueueStuck"]["for"] == "5m"
    assert "histogram_quantile(0.95" in by_name["PostingLag"]["expr"] and by_name["PostingLag"]["expr"].endswith("> 60")
    assert "histogram_quantile(0.99" in by_name["AckSlow"]["expr"] and by_name["AckSlow"]["expr"].endswith("> 1")
    assert 'increase(animegamer_turns_total{status="failed"}[15m])' in by_name["TurnFailures"]["expr"]
    for name, r in by_name.items():
        assert r["labels"]["severity"] in ("critical", "warning"), name
        assert r["annotations"]["summary"], name
    # The label values the rules match are the ones the processes use.
    worker_source = (ROOT / "inference" / "turn_runner.py").read_text()  # where a turn's outcome is counted
    for status in re.findall(r'animegamer_turns_total\{status="(\w+)"\}', RULES.read_text()):
        assert f'turns.labels(status="{status}"' in worker_source, status
    jobs = {j["job_name"] for j in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    for job in re.findall(r'up\{job="(\w+)"\}', RULES.read_text()):
        assert job in jobs, job


# --- the compose profile


def _mounts(svc: dict) -> list[tuple[str, str]]:
    out = []
    for v in svc.get("volumes", []):
        parts = v.split(":")
        out.append((parts[0], parts[1]))
    return out


def test_the_monitoring_profile_in_compose():
    c = compose()
    services = c["services"]
    monitoring = {n for n, s in services.items() if "monitoring" in s.get("profiles", [])}
    assert monitoring == {"prometheus", "grafana"}
    # The app's services are in no profile: `docker compose up` starts them as before, alone.
    assert not [n for n, s in services.items() if s.get("profiles") and n not in monitoring]
    assert services["prometheus"]["image"].startswith("prom/prometheus:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    for name in monitoring:
        svc = services[name]
        assert svc["profiles"] == ["monitoring"]
        for source, _target in _mounts(svc):
            if source.startswith("."):  # a file of this repository, relative to docker/
                assert (DOCKER / source).exists(), f"{name} mounts {source}, which does not exist"
            else:
                assert source in c["volumes"], f"{name}: volume {source} is not declared"
        assert all(p.startswith("127.0.0.1:") for p in svc.get("ports", [])), f"{name} publishes beyond loopback by default"

    # Prometheus reads the rules where compose mounts them.
    prom_mounts = dict((t, s) for s, t in _mounts(services["prometheus"]))
    prom = yaml.safe_load(PROMETHEUS.read_text())
    assert prom_mounts["/etc/prometheus/prometheus.yml"] == "./monitoring/prometheus.yml"
    for path in prom["rule_files"]:
        assert prom_mounts[path] == "./monitoring/rules.yml"
    # Grafana: provisioning and dashboards where its providers look; the datasource is the service.
    graf_mounts = dict((t, s) for s, t in _mounts(services["grafana"]))
    assert graf_mounts["/etc/grafana/provisioning"] == "./monitoring/grafana/provisioning"
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    assert graf_mounts[provider["options"]["path"]] == "./monitoring/grafana/dashboards"
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/" + DASHBOARD.name
    (ds,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert ds["url"] == "http://prometheus:9090" and ds["type"] == "prometheus"


def test_prometheus_scrapes_every_process_in_compose():
    from settings import Settings

    services = compose()["services"]
    jobs = {j["job_name"]: [t for sc in j["static_configs"] for t in sc["targets"]]
            for j in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]}
    # The bot: its health server's port, on every address of its container.
    bot_env = services["bot"]["environment"]
    port = int(bot_env.get("ANIMEGAMER_BOT_HEALTH_PORT", Settings.model_fields["bot_health_port"].default))
    assert jobs["bot"] == [f"bot:{port}"]
    assert bot_env["ANIMEGAMER_METRICS_HOST"] == "0.0.0.0"
    # Every worker service, on its metrics port.
    workers = {n: s for n, s in services.items() if s.get("command", [None])[0] == "worker"}
    assert workers
    expected = {f"{n}:{s['environment']['ANIMEGAMER_METRICS_PORT']}" for n, s in workers.items()}
    assert set(jobs["worker"]) == expected
    assert all(s["environment"]["ANIMEGAMER_METRICS_HOST"] == "0.0.0.0" for s in workers.values())
    # The play page is no compose service: no job scrapes it (prometheus.yml says how to add one).
    assert not any(s.get("command", [None])[0] == "play" for s in services.values())
    assert "play" not in jobs and "job_name: play" in PROMETHEUS.read_text()


# --- the tools, where installed


def test_promtool_checks_the_rules_and_the_config(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    r = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # The config too, with its rule file where it is in this checkout rather than in the container.
    config = yaml.safe_load(PROMETHEUS.read_text())
    config["rule_files"] = [str(RULES)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    r = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _compose_command() -> tuple[list[str], bool] | None:
    """docker's compose plugin (v2), else the standalone docker-compose 1.29 (Debian bookworm's
    package; .ci/run installs it where apt can): (command, whether it is v1); None: neither."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60).returncode == 0:
        return [docker, "compose"], False
    v1 = shutil.which("docker-compose")
    return ([v1], True) if v1 else None


def test_docker_compose_config_is_valid():
    """Compose itself reads the file with the monitoring profile: its schema, the interpolation of
    its variables, the profile's services."""
    found = _compose_command()
    if found is None:
        pytest.skip("neither docker's compose plugin nor docker-compose is installed")
    cmd, v1 = found
    source = DOCKER / "compose.yaml"
    if v1:  # 1.29 predates the top-level `name` (the project's name; v2 reads it): the rest is checked
        raw = yaml.safe_load(source.read_text())
        assert raw.pop("name") == "animegamer"
        source = DOCKER / f".compose-v1-{os.getpid()}.yaml"  # beside the original: relative paths stay right
        source.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "POSTGRES_PASSWORD": "dummy"}
    try:
        r = subprocess.run([*cmd, "-f", str(source), "--project-directory", str(DOCKER), "--profile", "monitoring", "config"],
                           capture_output=True, text=True, env=env, timeout=120)
    finally:
        if v1:
            source.unlink()
    assert r.returncode == 0, r.stderr
    services = yaml.safe_load(r.stdout)["services"]
    assert {"prometheus", "grafana", "bot", "postgres"} <= set(services)  # the profile's services are in
