"""Summaries of chats between named people (turns with ``metadata.speaker``), and that agent
sessions are summarised (and hashed) exactly as before."""

from __future__ import annotations

from memviewer.index.summarizer import Summarizer, extractive

GREETINGS = ["hey good afternoon", "hi, how goes it?", "good, you?"]


def chat(with_names: bool) -> list[dict]:
    lines = [
        ("Fahim", "user", GREETINGS[0]),
        ("Muhhamed", "assistant", GREETINGS[1]),
        ("Fahim", "user", GREETINGS[2]),
        *[("Fahim", "user", f"filler number {i} ok") for i in range(6)],
        ("Muhhamed", "assistant", "I finally finished reading the Pachinko saga by Min Jin Lee last night."),
        ("Fahim", "user", "I went for a long morning run along the river after the rain stopped."),
    ]
    return [
        {
            "role": role,
            "content": text,
            "timestamp": 1_704_000_000.0 + i,
            "meta": {"speaker": who} if with_names else None,
        }
        for i, (who, role, text) in enumerate(lines)
    ]


def test_a_chat_between_named_people_is_summarised_from_both_sides() -> None:
    summary, search = extractive(chat(with_names=True))
    assert summary.startswith("Between Fahim and Muhhamed.")
    # the informative sentences of both speakers, under their names, though they come late
    assert "Muhhamed: I finally finished reading the Pachinko saga" in summary
    assert "Fahim: I went for a long morning run" in summary
    assert "hey good afternoon" not in summary.split("Mentions:")[0]  # greetings are no content
    # every turn of both speakers is in the keyword text
    assert "Pachinko" in search and "how goes it" in search


def test_agent_sessions_keep_the_user_first_summary_and_hash() -> None:
    plain = chat(with_names=False)
    summary, _ = extractive(plain)
    assert summary.startswith("User: ") and "Between" not in summary
    assert "Muhhamed: " not in summary
    s = Summarizer()
    # the author only enters the hash when a turn names one: stored agent summaries stay valid
    no_meta = [{k: v for k, v in t.items() if k != "meta"} for t in plain]
    assert s.source_hash(plain) == s.source_hash(no_meta)
    assert s.source_hash(chat(with_names=True)) != s.source_hash(plain)
