"""Markdown: a readable transcript per session.

Each session gets a header table (ids, agent, scope, dates, counts, source,
lineage), then its archived turns under their own heading, the compaction
summary, and the active turns. Turn text is quoted (``>``) so headings or
rules inside a message cannot break the document's structure; tool calls fold
into ``<details>`` blocks with the function name and pretty-printed arguments;
an episode's first turn notes the episode id, intent and how it closed. The user's tags
and notes (when there are any) are a row of the header table and a line above a turn.

A transcript is opened in renderers (GitHub, editors' previews) and terminals, so stored text
never reaches it raw: terminal control bytes (C0 except tab and newline, DEL, C1 — ESC
sequences, BEL) are dropped, ``&`` and ``<`` are written as entities so no HTML (``<script>``,
``<img onerror>``, a closing ``</code>`` or ``</details>``) is ever live, and values shown as
code use a backtick run longer than any inside them. Fenced blocks (tool-call arguments) are
literal in Markdown and only lose the control bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO, cast

from memviewer.io.exporters.bundle import Bundle
from memviewer.timeutil import iso

LINEAGE = ("lineage_id", "root_session_id", "thread_id", "parent_session_id")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _plain(value: Any) -> str:
    """Stored text without terminal control bytes (tab and newline stay)."""
    return _CONTROL.sub("", str(value))


def _text(value: Any) -> str:
    """Stored text as inert Markdown: no control bytes, no live HTML or entities."""
    return _plain(value).replace("&", "&amp;").replace("<", "&lt;")


def _code(value: Any) -> str:
    """``value`` as a code span that nothing inside it can close."""
    text = _plain(value).replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _cell(value: Any) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> str:
    text = _text(text)
    if not text.strip():
        return "> *(empty)*"
    return "\n".join(">" + (" " + line if line else "") for line in text.split("\n"))


def _pretty_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return cast("str", args)
    return json.dumps(args, ensure_ascii=False, indent=2, sort_keys=False)


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return fence


def _tool_calls(calls: Any) -> list[str]:
    if not isinstance(calls, list):
        if calls is None:
            return []
        body = _plain(json.dumps(calls, ensure_ascii=False))
        return [f"{_fence(body)}json", body, _fence(body), ""]
    out: list[str] = []
    for call in calls:
        if not isinstance(call, dict):
            call = {"value": call}
        fn = call.get("function")
        if not isinstance(fn, dict):
            fn = {}
        name = fn.get("name") or call.get("name") or "tool"
        args = fn.get("arguments", call.get("arguments", call.get("args", call.get("input", {}))))
        ident = f" ({call['id']})" if call.get("id") else ""
        body = _plain(_pretty_args(args))
        fence = _fence(body)
        out += [
            f"<details><summary>tool call <code>{_cell(name)}</code>{_cell(ident)}</summary>",
            "",
            f"{fence}json",
            body,
            fence,
            "",
            "</details>",
            "",
        ]
    return out


class MarkdownWriter:
    def __init__(self, stream: TextIO, redaction: str | None) -> None:
        self.stream = stream
        self.redaction = redaction
        self.count = 0

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def write(self, bundle: Bundle) -> None:
        s = bundle.session
        turns = bundle.turns
        archived = [t for t in turns if t["archived"]]
        summary = [t for t in turns if not t["archived"] and t["is_compaction_summary"]]
        active = [t for t in turns if not t["archived"] and not t["is_compaction_summary"]]
        episodes = {e["id"]: e for e in bundle.episodes}
        lines: list[str] = []
        if self.count:
            lines += ["---", ""]
        lines += [f"# {_cell(s['title'] or s['id'])}", "", "| | |", "|---|---|"]
        rows = [
            ("session", _code(s["id"])),
            ("agent", s["agent"] or "—"),
            ("scope", f"{s['scope']}:{s['scope_id']}"),
            ("status", s["status"]),
            ("started", iso(s["started_at"])),
            ("last seen", iso(s["last_seen_at"])),
            ("turns", f"{len(turns)} ({len(archived)} archived, {len(turns) - len(archived)} active)"),
            ("episodes", str(len(bundle.episodes))),
        ]
        if s["closed_at"] is not None:
            rows.insert(6, ("closed", iso(s["closed_at"])))
        if s["source"]:
            rows.append(("source", s["source"]))
        lineage = [f"{k}={_code(s[k])}" for k in LINEAGE if s.get(k)]
        if lineage:
            rows.append(("lineage", ", ".join(lineage)))
        mark = bundle.annotations.get(bundle.id) or {}
        if mark.get("tags"):
            rows.append(("tags", ", ".join(mark["tags"])))
        if mark.get("note") is not None:
            rows.append(("note", mark["note"]))
        if self.redaction:
            rows.append(("redaction", self.redaction))
        code_rows = {"session", "lineage"}  # already code spans: only the table's pipe is escaped
        lines += [
            f"| {k} | {v.replace('|', chr(92) + '|') if k in code_rows else _cell(v)} |" for k, v in rows
        ]
        lines.append("")
        seen_episodes: set[str] = set()
        if archived:
            lines += [f"## Archived turns ({len(archived)}, compacted out of the active window)", ""]
            lines += self._turns(archived, episodes, seen_episodes, bundle.annotations)
        for t in summary:
            lines += [
                f"## Compaction summary (replaces {t['replaced_count']} turns)",
                "",
                f"*{iso(t['timestamp'])}*",
                "",
                _quote(t["content"]),
                "",
            ]
        if active:
            heading = "Active turns" if archived or summary else "Turns"
            lines += [f"## {heading} ({len(active)})", ""]
            lines += self._turns(active, episodes, seen_episodes, bundle.annotations)
        self.stream.write("\n".join(lines) + "\n")
        self.count += 1

    def _turns(
        self,
        turns: list[dict[str, Any]],
        episodes: dict[str, dict[str, Any]],
        seen: set[str],
        marks: dict[str, dict[str, Any]],
    ) -> list[str]:
        out: list[str] = []
        for t in turns:
            head = f"### #{t['idx']} · {_text(t['role'])} · {iso(t['timestamp'])}"
            if t["tool_call_id"]:
                head += f" · result of {_code(t['tool_call_id'])}"
            out += [head, ""]
            eid = t["episode_id"]
            if eid and eid not in seen:
                seen.add(eid)
                ep = episodes.get(eid)
                if ep is not None:
                    closed = ep["closed_by"] or ep["status"]
                    out += [
                        f"*episode {_code(eid)} · intent {_text(ep['intent_kind'])} "
                        f"({ep['intent_confidence']:.2f}, {_text(ep['intent_rule'])}) · {_text(closed)}*",
                        "",
                    ]
            mark = marks.get(t["id"]) or {}
            if mark.get("tags"):
                out += [f"*tags: {', '.join(_code(tag) for tag in mark['tags'])}*", ""]
            if mark.get("note") is not None:
                out += ["*note:* " + _text(mark["note"]).replace("\n", " "), ""]
            out += [_quote(t["content"] or ""), ""]
            out += _tool_calls(t["tool_calls"])
        return out
