"""What one drift-diff run hands the next: the open items carried in the report
(:class:`Carried`), and how one event read from a changed entity opens or closes them
(:class:`Scan`). Each carried list is bounded (:func:`bounded`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acmi_core.jobs.drift_checks import (
    CLOSING_KINDS,
    COMMS_WINDOW_MS,
    CORRECTION_KIND,
    DATE_WINDOW_MS,
    RESOLVING_KINDS,
    SEVERITIES,
    TRACKED_KINDS,
    comms_rule,
    corrected,
    due_dates,
)
from acmi_core.jobs.foreign import correlation_of, iso, kind_of, summary_of, ts_of


def _items(value: Any, *numbers: str) -> list[dict[str, Any]]:
    """The dicts of a stored list that have every field in ``numbers`` as a number: a
    report edited by hand (or by an older version) never breaks a run."""
    if not isinstance(value, list):
        return []
    return [
        item
        for item in value
        if isinstance(item, dict)
        and all(isinstance(item.get(n), int) and not isinstance(item.get(n), bool) for n in numbers)
    ]


@dataclass
class Carried:
    """What one run hands the next, read from and written to the report."""

    requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # cid -> request
    deadlines: dict[str, dict[str, Any]] = field(default_factory=dict)
    comms: dict[str, dict[str, Any]] = field(default_factory=dict)
    heartbeats: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> item
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent -> item
    resolved: dict[str, int] = field(default_factory=dict)  # cid -> ms it was resolved
    closed: dict[str, int] = field(default_factory=dict)  # cid -> ms its work closed
    corrected: dict[str, int] = field(default_factory=dict)  # str(event ts) -> ms
    policy_digest: str | None = None

    @classmethod
    def from_report(cls, report: Any) -> Carried:
        if not isinstance(report, dict):
            return cls()
        findings = report.get("findings") if isinstance(report.get("findings"), dict) else {}
        pending = report.get("pending") if isinstance(report.get("pending"), dict) else {}
        assert isinstance(findings, dict) and isinstance(pending, dict)
        carried = cls(policy_digest=_str(report.get("policy_digest")))
        for item in _items(findings.get("stale_events"), "ts") + _items(
            pending.get("requests"), "ts"
        ):
            if isinstance(item.get("correlationId"), str):
                carried.requests[item["correlationId"]] = item
        for item in _items(findings.get("date_drift"), "ts", "due_ms") + _items(
            pending.get("deadlines"), "ts", "due_ms"
        ):
            carried.deadlines[deadline_key(item)] = item
        for item in _items(findings.get("comms"), "ts"):
            carried.comms[comms_key(item)] = item
        for item in _items(findings.get("stale_heartbeats"), "last_heartbeat_ms"):
            if isinstance(item.get("agent"), str):
                carried.heartbeats[item["agent"]] = item
        models = findings.get("model_drift")
        if isinstance(models, dict):
            for item in _items(models.get("major")) + _items(models.get("minor")):
                if isinstance(item.get("agent"), str) and item.get("severity") in SEVERITIES:
                    carried.models[item["agent"]] = item
        for name, target in (
            ("resolved", carried.resolved),
            ("closed", carried.closed),
            ("corrected", carried.corrected),
        ):
            raw = pending.get(name)
            if isinstance(raw, dict):
                target.update((k, int(v)) for k, v in raw.items() if isinstance(v, int | float))
        return carried


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def deadline_key(item: Mapping[str, Any]) -> str:
    """A carried due date's identity: entity, event ts, field."""
    return f"{item.get('entity')}|{item.get('ts')}|{item.get('field')}"


def comms_key(item: Mapping[str, Any]) -> str:
    """A carried violation's identity: entity, ts, source, kind."""
    return f"{item.get('entity')}|{item.get('ts')}|{item.get('source')}|{item.get('kind')}"


def bounded(
    items: dict[str, dict[str, Any]], order: str, cap: int, newest: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """At most ``cap`` items sorted by ``order`` (oldest first: the oldest are kept,
    since they are the ones that become or stay findings), and how many were dropped."""
    ranked = sorted(items.values(), key=lambda i: (i.get(order) or 0, str(i)), reverse=newest)
    return ranked[:cap], max(0, len(ranked) - cap)


@dataclass
class Scan:
    """One run's pass over the new events: the carried state it updates, and how many
    items it opened and closed."""

    now: int
    carried: Carried
    closed: int = 0
    opened: int = 0
    events: int = 0

    def resolve(self, cid: str, at: int) -> None:
        self.carried.resolved[cid] = max(at, self.carried.resolved.get(cid, 0))
        if self.carried.requests.pop(cid, None) is not None:
            self.closed += 1

    def close_deadlines(self, cid: str) -> None:
        for key in [k for k, v in self.carried.deadlines.items() if v.get("correlationId") == cid]:
            del self.carried.deadlines[key]
            self.closed += 1

    def take(self, entity: str, data: dict[str, Any]) -> None:
        """One event read from a changed entity (events arrive oldest first)."""
        self.events += 1
        kind, cid, ts = kind_of(data), correlation_of(data), ts_of(data)
        carried = self.carried
        if kind == CORRECTION_KIND:
            times, cids = corrected(data)
            for original in times:
                carried.corrected[str(original)] = ts
                for key in [k for k, v in carried.comms.items() if v.get("ts") == original]:
                    del carried.comms[key]
                    self.closed += 1
                # the reference also counts a request the correction points at as handled
                for rid in [c for c, v in carried.requests.items() if v.get("ts") == original]:
                    self.resolve(rid, ts)
            for inferred in cids:
                self.resolve(inferred, ts)
        if cid and kind in RESOLVING_KINDS:
            self.resolve(cid, ts)
        if cid and kind in CLOSING_KINDS:
            carried.closed[cid] = max(ts, carried.closed.get(cid, 0))
            self.close_deadlines(cid)
        if (
            cid
            and kind in TRACKED_KINDS
            and cid not in carried.resolved
            and str(ts) not in carried.corrected
        ):
            if cid not in carried.requests:
                self.opened += 1
            carried.requests[cid] = {
                "correlationId": cid,
                "kind": kind,
                "entity": entity,
                "ts": ts,
                "summary": summary_of(data),
            }
        if self.now - ts <= DATE_WINDOW_MS and not (cid and cid in carried.closed):
            for where, due in due_dates(data):
                item = {
                    "entity": entity,
                    "ts": ts,
                    "kind": kind,
                    "correlationId": cid,
                    "field": where,
                    "due_ms": due,
                    "due": iso(due),
                    "summary": summary_of(data),
                }
                key = deadline_key(item)
                if key not in carried.deadlines:
                    self.opened += 1
                carried.deadlines[key] = item
        rule = comms_rule(data)
        if rule and self.now - ts <= COMMS_WINDOW_MS and str(ts) not in carried.corrected:
            item = {
                "entity": entity,
                "ts": ts,
                "kind": kind,
                "source": data.get("source") if isinstance(data.get("source"), str) else "",
                "rule": rule,
                "summary": summary_of(data),
            }
            if rule == "snake_only":
                item["correlation_id"] = data.get("correlation_id")
            key = comms_key(item)
            if key not in carried.comms:
                self.opened += 1
            carried.comms[key] = item
