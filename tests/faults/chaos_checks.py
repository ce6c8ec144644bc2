"""The chaos soak's invariants, read through the public API only (as an operator would):

- lost: an accepted job (201) the API no longer shows;
- over capacity: a sample in which a cluster's GPUs held by the shares (not ended) of Active or
  Nominated placements exceed its GPUs, or a link's reserved bandwidth its capacity (the
  Global's books);
- false "started together": a job shown Running while a share of it has not started (Assigned
  or Accepted);
- 5xx: an answer of 500 or above other than the documented 503 (database unreachable);
- stuck (at the end, after the settle time): a job Running whose clusters report fewer GPUs in
  use than its Running shares hold there, or a job Placed or Dispatched that did not move
  during the settle time;
- books right again: after an agent comes back, the time until the GPUs the Global holds in
  Running shares on its cluster no longer exceed what the cluster reports in use."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

HOLDING = {"Active", "Nominated"}
NOT_STARTED = {"Assigned", "Accepted"}
ENDED = {"Succeeded", "Failed", "Cancelled"}
STILL_S = 30  # a job Placed or Dispatched this long at the end has stopped moving


@dataclass
class Figures:
    accepted: dict[str, str] = field(default_factory=dict)  # uid -> name
    refused: set[str] = field(default_factory=set)
    submitted: set[str] = field(default_factory=set)  # every name sent
    refused_stored: set[str] = field(default_factory=set)  # refused, yet listed
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    over_capacity: int = 0  # samples with a cluster or link over
    worst_over: str = ""
    false_started: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    stuck: dict[str, str] = field(default_factory=dict)  # uid -> why
    invented: set[str] = field(default_factory=set)
    server_errors: int = 0  # 5xx but 503
    unavailable: int = 0  # 503
    books_right_s: list[float] = field(default_factory=list)
    books_never_right: int = 0
    notes: list[str] = field(default_factory=list)
    finals: int = 0  # final samples taken (stuck: in every one)
    _placed_seen: dict[str, str] = field(default_factory=dict)  # uid -> updatedAt (settle)

    def answer(self, status: int) -> None:
        self.statuses[status] += 1
        if status == 503:
            self.unavailable += 1
        elif status >= 500:
            self.server_errors += 1

    def report(self) -> dict[str, Any]:
        right = sorted(self.books_right_s)
        return {
            "jobs accepted": len(self.accepted),
            "documents refused": len(self.refused),
            "faults injected": dict(sorted(self.faults.items())),
            "faults total": sum(self.faults.values()),
            "samples": self.samples,
            "samples over capacity": self.over_capacity,
            "worst over capacity": self.worst_over,
            'false "started together"': len(self.false_started),
            "lost jobs": len(self.lost),
            "invented jobs": len(self.invented),
            "refused documents stored": len(self.refused_stored),
            "jobs stuck": len(self.stuck),
            "stuck": dict(list(self.stuck.items())[:10]),
            "5xx (503 aside)": self.server_errors,
            "503 (documented: database unreachable or busy)": self.unavailable,
            "requests unanswered": self.unanswered,
            "books right again after agent return, s (median, max)": (
                (round(right[len(right) // 2], 1), round(right[-1], 1)) if right else None
            ),
            "agent returns whose books were never right": self.books_never_right,
            "notes": self.notes[:10],
        }


async def _get(api: httpx.AsyncClient, figures: Figures, path: str) -> Any | None:
    try:
        response = await api.get(path)
    except httpx.HTTPError:
        figures.unanswered += 1
        return None
    figures.answer(response.status_code)
    return response.json() if response.status_code == 200 else None


async def sample(
    api: httpx.AsyncClient,
    figures: Figures,
    returns: list[tuple[str, datetime]],
    *,
    final: bool = False,
) -> None:
    """One sample of every invariant (`final`: also what may not be stuck at the end)."""
    known = set(figures.accepted)  # before the read: a job accepted during it may be missing
    clusters = await _get(api, figures, "/api/v1/clusters")
    links = await _get(api, figures, "/api/v1/links")
    jobs = await _get(api, figures, "/api/v1/jobs?limit=500")
    if clusters is None or links is None or jobs is None:
        return
    figures.samples += 1
    shown = {j["uid"]: j for j in jobs["items"]}
    details = {}
    for uid, job in shown.items():
        if job["clusters"] and job["state"] not in {"Succeeded", "Failed", "Cancelled"}:
            detail = await _get(api, figures, f"/api/v1/jobs/{uid}")
            if detail is not None:
                details[uid] = detail
    total = {c["name"]: sum(g["total"] for g in c["capacity"]) for c in clusters["items"]}
    used = {c["name"]: sum(g["used"] for g in c["capacity"]) for c in clusters["items"]}
    held, running = _books_of(details)
    for uid, detail in details.items():
        shares = (detail.get("placement") or {}).get("shares", [])
        if detail["state"] == "Running" and any(s["phase"] in NOT_STARTED for s in shares):
            figures.false_started.add(uid)
    over_clusters = [c for c in held if held[c] > total.get(c, 0)]
    if over_clusters:  # read those jobs again: one may have ended while the others were read
        again = {}
        for uid, detail in details.items():
            if {s["cluster"] for s in _holding(detail)} & set(over_clusters):
                fresh = await _get(api, figures, f"/api/v1/jobs/{uid}")
                same = (
                    fresh
                    and (fresh.get("placement") or {}).get("uid") == detail["placement"]["uid"]
                )
                if same:
                    again[uid] = fresh
        held, _ = _books_of(again)
        over_clusters = [c for c in over_clusters if held[c] > total.get(c, 0)]
    over = [f"{c} {held[c]}/{total[c]} GPUs" for c in over_clusters]
    over += [
        f"link {link['clusterA']}-{link['clusterB']} {link['reservedGbps']}/{link['capacityGbps']}"
        for link in links["items"]
        if link["reservedGbps"] > link["capacityGbps"] + 1e-6
    ]
    if over:
        figures.over_capacity += 1
        figures.worst_over = ", ".join(over)
        if over_clusters and len(figures.notes) < 20:  # what held them, to judge the cause
            figures.notes.append(f"over: {figures.worst_over}: {_holders(again, over_clusters)}")
    _books(figures, returns, running, used, clusters["items"])
    if len(shown) < 500:  # every job on one page: a missing accepted job is lost
        figures.lost |= known - set(shown)
        if final:  # (during the run a job may show before its submitter has its answer)
            # (a job whose submission went unanswered may be stored: not invented)
            figures.invented = {u for u, j in shown.items() if j["name"] not in figures.submitted}
            figures.refused_stored = {j["name"] for j in shown.values()} & figures.refused
    if final:
        figures.books_never_right = len(returns)
        _stuck(figures, shown, details, running, used)


def _holders(details: dict[str, Any], clusters: list[str]) -> str:
    """Each share held on the clusters: job, its state, the share's phase and GPUs."""
    return "; ".join(
        f"{detail['name']} ({detail['state']}) {share['cluster']} {share['phase']} {share['gpus']}"
        for detail in details.values()
        for share in _holding(detail)
        if share["cluster"] in clusters
    )


def _holding(detail: dict[str, Any]) -> list[dict[str, Any]]:
    """The shares of the job's placement, while it holds capacity, that have not ended (a
    share that ended holds nothing, as the Global's books count it: scheduling/books.py)."""
    placement = detail.get("placement") or {}
    if placement.get("state") not in HOLDING:
        return []
    return [s for s in placement.get("shares", []) if s["phase"] not in ENDED]


def _books_of(details: dict[str, Any]) -> tuple[Counter[str], Counter[str]]:
    """GPUs held by placements per cluster, and of them those in Running shares."""
    held: Counter[str] = Counter()
    running: Counter[str] = Counter()
    for detail in details.values():
        for share in _holding(detail):
            held[share["cluster"]] += share["gpus"]
            if share["phase"] == "Running":
                running[share["cluster"]] += share["gpus"]
    return held, running


def _books(
    figures: Figures,
    returns: list[tuple[str, datetime]],
    running: Counter[str],
    used: dict[str, int],
    clusters: list[dict[str, Any]],
) -> None:
    """An agent that came back: its cluster's books are right once the cluster's inventory
    has been updated since (its new agent's snapshot) and the GPUs the Global holds in
    Running shares there do not exceed what the cluster reports in use."""
    updated = {c["name"]: c["inventoryUpdatedAt"] for c in clusters}
    for name, back_at in list(returns):
        fresh = updated.get(name) and datetime.fromisoformat(updated[name]) >= back_at
        if fresh and running[name] <= used.get(name, 0):
            figures.books_right_s.append((datetime.now(UTC) - back_at).total_seconds())
            returns.remove((name, back_at))


def _stuck(
    figures: Figures,
    shown: dict[str, Any],
    details: dict[str, Any],
    running: Counter[str],
    used: dict[str, int],
) -> None:
    """The jobs stuck in this final sample, kept only if stuck in every final sample before
    (a job whose pods just ended frees them in the inventory a moment before its report ends
    it: one sample can catch that moment)."""
    found: dict[str, str] = {}
    _stuck_in(found, shown, details, running, used)
    if figures.finals:
        found = {uid: why for uid, why in found.items() if uid in figures.stuck}
    figures.stuck = found
    figures.finals += 1


def _stuck_in(
    stuck: dict[str, str],
    shown: dict[str, Any],
    details: dict[str, Any],
    running: Counter[str],
    used: dict[str, int],
) -> None:
    for uid, detail in details.items():
        shares = (detail.get("placement") or {}).get("shares", [])
        if detail["state"] == "Running":
            short = [s["cluster"] for s in shares if running[s["cluster"]] > used[s["cluster"]]]
            if short:
                stuck[uid] = (
                    f"{detail['name']} Running, but {', '.join(short)} report(s) fewer GPUs in "
                    "use than its Running shares hold"
                )
    now = datetime.now(UTC)
    for uid, job in shown.items():
        moved = datetime.fromisoformat(
            job["timestamps"]["updatedAt"] or job["timestamps"]["submittedAt"]
        )
        if job["state"] in {"Placed", "Dispatched"} and (now - moved).total_seconds() > STILL_S:
            stuck.setdefault(uid, f"{job['name']} {job['state']} for over {STILL_S} s")
