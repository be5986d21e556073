"""Markdown: a readable transcript per session.

Each session gets a header table (ids, agent, scope, dates, counts, source,
lineage), then its archived turns under their own heading, the compaction
summary, and the active turns. Turn text is quoted (``>``) so headings or
rules inside a message cannot break the document's structure; tool calls fold
into ``<details>`` blocks with the function name and pretty-printed arguments;
an episode's first turn notes the episode id, intent and how it closed.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from memviewer.io.exporters.bundle import Bundle
from memviewer.timeutil import iso

LINEAGE = ("lineage_id", "root_session_id", "thread_id", "parent_session_id")


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> str:
    if not text.strip():
        return "> *(empty)*"
    return "\n".join(">" + (" " + line if line else "") for line in text.split("\n"))


def _pretty_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return json.dumps(args, ensure_ascii=False, indent=2, sort_keys=False)


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return fence


def _tool_calls(calls: Any) -> list[str]:
    if not isinstance(calls, list):
        return [] if calls is None else ["```json", json.dumps(calls, ensure_ascii=False), "```", ""]
    out: list[str] = []
    for call in calls:
        if not isinstance(call, dict):
            call = {"value": call}
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = fn.get("name") or call.get("name") or "tool"
        args = fn.get("arguments", call.get("arguments", call.get("args", call.get("input", {}))))
        ident = f" ({call['id']})" if call.get("id") else ""
        body = _pretty_args(args)
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
            ("session", f"`{s['id']}`"),
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
        lineage = [f"{k}=`{s[k]}`" for k in LINEAGE if s.get(k)]
        if lineage:
            rows.append(("lineage", ", ".join(lineage)))
        if self.redaction:
            rows.append(("redaction", self.redaction))
        lines += [f"| {k} | {_cell(v)} |" for k, v in rows]
        lines.append("")
        seen_episodes: set[str] = set()
        if archived:
            lines += [f"## Archived turns ({len(archived)}, compacted out of the active window)", ""]
            lines += self._turns(archived, episodes, seen_episodes)
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
            lines += self._turns(active, episodes, seen_episodes)
        self.stream.write("\n".join(lines) + "\n")
        self.count += 1

    def _turns(
        self, turns: list[dict[str, Any]], episodes: dict[str, dict[str, Any]], seen: set[str]
    ) -> list[str]:
        out: list[str] = []
        for t in turns:
            head = f"### #{t['idx']} · {t['role']} · {iso(t['timestamp'])}"
            if t["tool_call_id"]:
                head += f" · result of `{t['tool_call_id']}`"
            out += [head, ""]
            eid = t["episode_id"]
            if eid and eid not in seen:
                seen.add(eid)
                ep = episodes.get(eid)
                if ep is not None:
                    closed = ep["closed_by"] or ep["status"]
                    out += [
                        f"*episode `{eid}` · intent {ep['intent_kind']} "
                        f"({ep['intent_confidence']:.2f}, {ep['intent_rule']}) · {closed}*",
                        "",
                    ]
            out += [_quote(t["content"] or ""), ""]
            out += _tool_calls(t["tool_calls"])
        return out
