"""HyperNode members resolved as Volcano resolves them (its `GetMembers` and HyperNode cache),
so that the Global sees the topology Volcano's scheduler will place by:

- a Node member's `exactMatch` names one node; `regexMatch` is Go's `regexp.MatchString`, which
  searches the name (not anchored), with RE2 syntax (`\\z`, `\\pL`; no backreferences);
  `labelMatch` is a full `metav1.LabelSelector` (`matchLabels` and `matchExpressions` with In,
  NotIn, Exists, DoesNotExist), and an empty one selects nothing;
- a HyperNode member is resolved by `exactMatch` only: a regex or label selector there selects
  no HyperNode;
- a member that cannot be resolved (a pattern RE2 refuses, an invalid selector) selects nothing
  and is reported once as a warning naming the HyperNode; it never stops the agent.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from volcano_global.rpc.v1 import agent_pb2 as pb

log = logging.getLogger(__name__)

_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
# apimachinery's validation of label keys (qualified names) and values.
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class Unresolvable(ValueError):
    """A member selector Volcano could not use either; it selects nothing."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values  # NotIn


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> Any:
    """The pattern compiled with RE2 (the syntax Go's regexp implements), else Unresolvable.
    Cached: the topology is resolved again on every inventory change."""
    if _any_byte_escape(pattern):
        return Unresolvable(
            f"regexMatch pattern {pattern!r} does not compile: invalid escape sequence \\C"
        )
    options = re2.Options()
    options.log_errors = False  # the refusal is reported once, per HyperNode, by the caller
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        return Unresolvable(f"regexMatch pattern {pattern!r} does not compile: {reason}")


def _any_byte_escape(pattern: str) -> bool:
    """Whether the pattern uses `\\C` (any byte), which RE2 takes and Go's regexp refuses.
    Text between `\\Q` and `\\E` is literal."""
    i, literal = 0, False
    while i < len(pattern) - 1:
        pair = pattern[i : i + 2]
        if literal:
            literal, i = (False, i + 2) if pair == "\\E" else (True, i + 1)
            continue
        if pair[0] == "\\":
            if pair == "\\C":
                return True
            literal = pair == "\\Q"
            i += 2
        else:
            i += 1
    return False


def regex(pattern: Any) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise Unresolvable("regexMatch needs a non-empty pattern")
    compiled = _compiled(pattern)
    if isinstance(compiled, Unresolvable):
        raise compiled
    return compiled


def label_selector(raw: Any) -> list[Requirement]:
    """`metav1.LabelSelectorAsSelector`, checked as `labels.NewRequirement` checks."""
    if not isinstance(raw, dict):
        raise Unresolvable("labelMatch must be a mapping")
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        raise Unresolvable("labelMatch has malformed matchLabels or matchExpressions")
    requirements = [_requirement(k, "In", [v]) for k, v in sorted(match_labels.items())]
    for expression in expressions:
        if not isinstance(expression, dict):
            raise Unresolvable("a labelMatch expression must be a mapping")
        requirements.append(
            _requirement(
                expression.get("key"), expression.get("operator"), expression.get("values") or []
            )
        )
    return requirements


def _requirement(key: Any, operator: Any, values: Any) -> Requirement:
    if not isinstance(key, str) or not _qualified_name(key):
        raise Unresolvable(f"labelMatch key {key!r} is not a valid label key")
    if operator not in _OPERATORS:
        raise Unresolvable(f"{operator!r} is not a valid label selector operator")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise Unresolvable(f"labelMatch values of {key!r} must be strings")
    if operator in ("In", "NotIn") and not values:
        raise Unresolvable(f"labelMatch {key!r} {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise Unresolvable(f"labelMatch {key!r} {operator} takes no values")
    for value in values:
        if len(value) > 63 or (value and not _NAME.fullmatch(value)):
            raise Unresolvable(f"labelMatch value {value!r} of {key!r} is not a valid label value")
    return Requirement(key, operator, frozenset(values))


def _qualified_name(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _SUBDOMAIN.fullmatch(prefix)):
        return False  # a prefix holding another "/" is no DNS subdomain either
    return 0 < len(name) <= 63 and _NAME.fullmatch(name) is not None


def searched(pattern: Any, names: Iterable[str]) -> frozenset[str]:
    compiled = regex(pattern)
    return frozenset(n for n in names if compiled.search(n))


def node_members(
    selector: Any,
    nodes: Mapping[str, Mapping[str, str]],
    search: Callable[[Any, Iterable[str]], frozenset[str]] = searched,
) -> set[str]:
    """Names of the nodes (name -> labels) a Node member's selector picks; the union when
    several selectors are set, as Volcano's `GetMembers` (its CRD allows one). `search` gives
    the names a regexMatch pattern selects."""
    if not isinstance(selector, dict):
        raise Unresolvable("a member needs a selector")
    members: set[str] = set()
    if "exactMatch" in selector:
        name = (selector["exactMatch"] or {}).get("name")
        if name in nodes:
            members.add(name)
    if "regexMatch" in selector:
        members.update(search((selector["regexMatch"] or {}).get("pattern"), nodes))
    if "labelMatch" in selector:
        requirements = label_selector(selector["labelMatch"])
        if requirements:  # an empty selector selects nothing here (not everything)
            members.update(
                n for n, labels in nodes.items() if all(r.matches(labels) for r in requirements)
            )
    return members


def hypernode_member(selector: Any) -> str | None:
    """The child a HyperNode member names: `exactMatch` only, as Volcano."""
    if not isinstance(selector, dict) or "exactMatch" not in selector:
        raise Unresolvable("a HyperNode member is resolved by exactMatch only")
    return (selector["exactMatch"] or {}).get("name") or None


class HyperNodeTopology:
    """Domains from HyperNodes; each node's domain is the lowest-tier HyperNode selecting it.
    Problems are logged once while they last (the topology is resolved on every change)."""

    def __init__(self, on_problem: Callable[[str, str], None] | None = None) -> None:
        """`on_problem(hypernode, problem)`: told, as the log is, once of each problem while
        it lasts (the agent records an Event on the HyperNode)."""
        self._on_problem = on_problem
        self._reported: set[tuple[str, str]] = set()
        # What each pattern selects, while the node names stay the same: an RE2 search from
        # Python costs ~5 us, and most changes (pods, node status) leave the names alone.
        self._names: frozenset[str] = frozenset()
        self._searched: dict[str, frozenset[str]] = {}

    def _search(self, pattern: Any, names: Iterable[str]) -> frozenset[str]:
        if not isinstance(pattern, str):
            return searched(pattern, names)  # refused
        if pattern not in self._searched:
            self._searched[pattern] = searched(pattern, names)
        return self._searched[pattern]

    def resolve(
        self, hypernodes: Iterable[dict[str, Any]], nodes: Iterable[dict[str, Any]]
    ) -> tuple[dict[str, pb.Domain], dict[str, str]]:
        by_name = {h["metadata"]["name"]: h for h in hypernodes}
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nodes}
        if self._names != labels.keys():
            self._names, self._searched = frozenset(labels), {}
        domains: dict[str, pb.Domain] = {}
        parent: dict[str, str] = {}
        node_domain: dict[str, tuple[int, str]] = {}
        problems: list[tuple[str, str]] = []  # (HyperNode, what is wrong with it)
        for name, hypernode in sorted(by_name.items()):
            spec = hypernode.get("spec") or {}
            tier = int(spec.get("tier", 1))
            domains[name] = pb.Domain(
                name=name, tier=max(tier, 1), tier_name=spec.get("tierName", "")
            )
            for index, member in enumerate(spec.get("members") or []):
                where = f"HyperNode {name} members[{index}]"
                try:
                    if member.get("type") == "HyperNode":
                        child = hypernode_member(member.get("selector"))
                        if child is None or child == name:
                            continue
                        if parent.setdefault(child, name) != name:
                            problems.append(
                                (
                                    name,
                                    f"{where}: {child} already belongs to {parent[child]}; "
                                    "a HyperNode has one parent",
                                )
                            )
                    elif member.get("type") == "Node":
                        selector = member.get("selector")
                        for node in node_members(selector, labels, self._search):
                            if node not in node_domain or (tier, name) < node_domain[node]:
                                node_domain[node] = (tier, name)
                    else:
                        problems.append(
                            (name, f"{where}: unknown member type {member.get('type')!r}")
                        )
                except (Unresolvable, AttributeError) as exc:
                    why = str(exc) if isinstance(exc, Unresolvable) else "malformed member"
                    problems.append((name, f"{where}: {why}; it selects nothing"))
        for child, name in parent.items():
            if child in domains and domains[name].tier > domains[child].tier:
                domains[child].parent = name
        self._report(problems)
        return domains, {node: name for node, (_, name) in node_domain.items()}

    def _report(self, problems: list[tuple[str, str]]) -> None:
        for problem in problems:
            if problem not in self._reported:
                log.warning("%s", problem[1])
                if self._on_problem is not None:
                    self._on_problem(*problem)
        self._reported = set(problems)
