"""Two recall parameter sets side by side (A/B), and the one parser of ``key=value`` sets.

``parse_overrides("top_k=20,mode=flat,w_dense=0.3")`` validates a parameter
string (the CLI's ``--vs``, the Recall screen's B field) into recall keyword
overrides; ``compare`` runs both sets and lists every turn of either result with
its rank in each. Both sides read only: nothing here writes memory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.params import RECALL_INT_BOUNDS, RECALL_MODES, int_param

#: Integer recall parameters and their maxima (the request model's bounds).
INT_KEYS = {key: hi for key, (_lo, hi) in RECALL_INT_BOUNDS.items()}
#: Public weight names (as in ``diagnostics.params``) → ``scoring.Weights`` fields.
WEIGHT_KEYS = {
    "w_dense": "dense",
    "w_keyword": "keyword",
    "w_recency": "recency",
    "w_speaker": "speaker",
    "w_time": "time",
    "coverage_share": "coverage_share",
}
TEXT_KEYS = ("scope", "scope_id", "as_of")
ALIASES = {"k": "top_sessions", "m": "chunks_per_session", "flat": "mode"}
KEYS = (*INT_KEYS, "mode", "rerank", *TEXT_KEYS, *WEIGHT_KEYS)
_HINT = "write key=value pairs separated by commas, e.g. 'top_k=20,mode=flat,w_dense=0.3'"


def _bad(message: str) -> MemviewerError:
    return MemviewerError(INVALID_ARGUMENT, message, hint=_HINT)


def parse_overrides(spec: str) -> dict[str, Any]:
    """``key=value,...`` as validated overrides (public names; weights as ``w_*`` floats).

    Keys: ``top_sessions`` (``k``), ``chunks_per_session`` (``m``), ``top_k``,
    ``mode`` (hierarchical|flat; ``flat`` alone means ``mode=flat``), ``rerank``
    (true|false), ``scope``, ``scope_id``, ``as_of`` and the weights ``w_dense``,
    ``w_keyword``, ``w_recency``, ``w_speaker``, ``w_time``, ``coverage_share``.
    Hyphens in keys are read as underscores. Raises ``MemviewerError`` (invalid_argument).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise _bad("the parameter set is empty")
    out: dict[str, Any] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        value = value.strip()
        if not sep:
            if key == "flat":
                key, value = "mode", "flat"
            else:
                raise _bad(f"{part!r} is not key=value")
        key = ALIASES.get(key, key)
        if key not in KEYS:
            raise _bad(f"unknown recall parameter {key!r}; known: {', '.join(KEYS)}")
        if key in out:
            raise _bad(f"{key} is given twice")
        out[key] = _value(key, value)
    if not out:
        raise _bad("the parameter set is empty")
    return out


def _value(key: str, value: str) -> Any:
    if key in INT_KEYS:
        return int_param(key, value, None, *RECALL_INT_BOUNDS[key])
    if key == "mode":
        if value not in RECALL_MODES:
            raise _bad(f"mode must be one of {', '.join(RECALL_MODES)}, not {value!r}")
        return value
    if key == "rerank":
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise _bad(f"rerank must be true or false, not {value!r}")
    if key in WEIGHT_KEYS:
        try:
            number = float(value)
        except ValueError:
            raise _bad(f"{key} must be a number, not {value!r}") from None
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            raise _bad(f"{key} must be between 0 and 1, not {value!r}")
        return number
    if not value:
        raise _bad(f"{key} needs a value")
    return value


def apply_overrides(params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Recall keyword arguments: ``params`` with ``overrides`` (public names) laid over them."""
    out = dict(params)
    weights = dict(out.get("weights") or {})
    for key, value in overrides.items():
        if key in WEIGHT_KEYS:
            weights[WEIGHT_KEYS[key]] = value
        else:
            out[key] = value
    if weights:
        out["weights"] = weights
    return out


def public_params(out: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a recall result ran with (mode, scope and ``diagnostics.params``)."""
    d = out.get("diagnostics") or {}
    return {
        "mode": d.get("mode"),
        "scope": out.get("scope"),
        "scope_id": out.get("scope_id"),
        **d.get("params", {}),
    }


def diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every turn of either result list with its 1-based rank in each (None: absent).

    Ordered by rank in A, then the turns only B returned by their rank in B. ``change``
    is ``up`` / ``down`` (B ranks it better / worse), ``same``, ``new`` (only in B) or
    ``dropped`` (only in A).
    """
    rank_a = {r["turn_id"]: i for i, r in enumerate(a, 1)}
    rank_b = {r["turn_id"]: i for i, r in enumerate(b, 1)}
    order = list(rank_a) + [t for t in rank_b if t not in rank_a]
    rows = []
    for tid in order:
        ra, rb = rank_a.get(tid), rank_b.get(tid)
        if ra is None:
            change = "new"
        elif rb is None:
            change = "dropped"
        else:
            change = "up" if rb < ra else "down" if rb > ra else "same"
        rows.append({"turn_id": tid, "rank_a": ra, "rank_b": rb, "change": change})
    return rows


def compare(
    run: Callable[..., dict[str, Any]], query: str, params: Mapping[str, Any], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """Run recall (``run(query, **params)``, e.g. a reader's ``recall``) with ``params`` (A)
    and with ``overrides`` laid over them (B), both asked at the same moment (``as_of``),
    so a relative date means the same on both sides."""
    params = dict(params)
    if params.get("as_of") in (None, ""):
        params["as_of"] = time.time()
    a = run(query, **params)
    b = run(query, **apply_overrides(params, overrides))
    return {
        "query": query,
        "a": {"params": public_params(a), "results": a["results"]},
        "b": {"params": public_params(b), "results": b["results"]},
        "diff": diff(a["results"], b["results"]),
    }
