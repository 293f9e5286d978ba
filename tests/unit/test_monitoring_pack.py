"""The operations pack (charts/argus/files): every PromQL expression of the Grafana dashboard and
of the PrometheusRule alerts names only series the operator really exports, with labels those
series have. The names and labels come from the operator's own metrics module (its registry,
as a leader exports it), not from a list written here; a renamed metric or label, or one
invented in a panel, fails."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus.controller.metrics import Metrics
from fakes import FakeClock

pytestmark = pytest.mark.unit

FILES = Path(__file__).resolve().parents[2] / "charts" / "argus" / "files"
SERIES = re.compile(r"\b(argus_[a-z0-9_]+)\b")
# `by (a, b)` / `without (a)` groupings, and label matchers inside {...}.
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"(argus_[a-z0-9_]+)\s*\{([^}]*)\}")


def exported() -> dict[str, set[str]]:
    """Each series name the operator exports (histograms' _bucket/_sum/_count, counters'
    _total), with its label names (le for buckets)."""
    metrics = Metrics(FakeClock())
    metrics.observe_phases([])  # a leader: the leader-only gauges are served too
    out: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        if not family.name.startswith("argus_"):
            continue
        labels = set(getattr(family, "_labelnames", ()) or ())
        labels |= {k for s in family.samples for k in s.labels}
        if not labels:  # a labelled family without series yet: read the names from its metric object
            labels = _declared_labels(metrics, family.name)
        if family.type == "counter":
            out[f"{family.name}_total"] = labels
        elif family.type == "histogram":
            out.update({f"{family.name}_sum": labels, f"{family.name}_count": labels, f"{family.name}_bucket": labels | {"le"}})
        else:
            out[family.name] = labels
    return out


def _declared_labels(metrics: Metrics, name: str) -> set[str]:
    for value in vars(metrics).values():
        if getattr(value, "_name", None) in (name, f"{name}_total") or getattr(value, "_name", None) == name.removesuffix("_total"):
            return set(getattr(value, "_labelnames", ()))
    return set()


def dashboard_exprs() -> list[str]:
    dash = json.loads((FILES / "grafana-dashboard.json").read_text())

    def walk(node: Any) -> list[str]:
        if isinstance(node, dict):
            return ([node["expr"]] if isinstance(node.get("expr"), str) else []) + [e for v in node.values() for e in walk(v)]
        if isinstance(node, list):
            return [e for v in node for e in walk(v)]
        return []
    return walk(dash)


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load((FILES / "prometheus-rules.yaml").read_text()) for rule in group["rules"]]


def problems(expr: str, known: dict[str, set[str]]) -> list[str]:
    names = SERIES.findall(expr)
    found = [f"{n}: not exported by the operator" for n in names if n not in known]
    if not found and names:
        allowed = set().union(*(known[n] for n in names))
        for group in GROUPING.findall(expr):
            found += [f"label {g.strip()!r}: none of {sorted(set(names))} has it" for g in group.split(",")
                      if g.strip() and g.strip() not in allowed]
        for name, matchers in MATCHERS.findall(expr):
            for label in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", matchers):
                if label not in known[name] and label != "__name__":
                    found.append(f"{name}{{{label}}}: the series has no such label")
    return found


def test_the_metrics_module_is_read_not_a_list_written_here() -> None:
    known = exported()
    assert known["argus_ray_api_errors_total"] == {"operation", "cluster"}
    assert known["argus_submit_latency_seconds_bucket"] == {"le"} and "argus_submit_latency_seconds_count" in known
    assert known["argus_user_gpus_in_use"] == {"user"} and known["argus_leader"] == set()


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_expression_names_exported_series_and_labels(source: str) -> None:
    known = exported()
    exprs = dashboard_exprs() if source == "dashboard" else [r["expr"] for r in alert_rules()]
    assert len(exprs) >= 8
    assert all(SERIES.search(e) for e in exprs), [e for e in exprs if not SERIES.search(e)]
    wrong = [f"{e}: {p}" for e in exprs for p in problems(e, known)]
    assert not wrong, "\n".join(wrong)


def test_the_check_bites() -> None:
    known = exported()
    assert problems("sum(argus_tasks_running)", known) == ["argus_tasks_running: not exported by the operator"]
    assert problems("sum by (namespace) (argus_tasks)", known) == ["label 'namespace': none of ['argus_tasks'] has it"]
    assert problems('argus_ray_api_calls_total{op="submit"}', known) == ["argus_ray_api_calls_total{op}: the series has no such label"]
    assert problems('sum by (le) (rate(argus_admission_pass_seconds_bucket[5m]))', known) == []


def test_the_alerts_the_issue_asks_for_are_there_each_with_a_severity_and_a_summary() -> None:
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    assert {"ArgusOperatorAbsent", "ArgusNoLeader", "ArgusQueueNotMoving", "ArgusRayUnreachable", "ArgusReconcileErrors"} <= set(names)
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning", "info") and rule["annotations"]["summary"], rule["alert"]


def test_the_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    dash = json.loads((FILES / "grafana-dashboard.json").read_text())
    assert dash["uid"] == "argus-operator" and [v["name"] for v in dash["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
