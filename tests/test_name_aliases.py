"""The names a chat calls its two authors by ("Hey Kate!" to the author "Emi") name them in a
question: the retrievers search without them and the named author's turns are favoured. Real
store and LanceDB, ``HashEmbedder`` (the ``service`` fixture)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from memviewer.recall import names
from memviewer.store.authors import ALIAS_MIN, aliases_of, called


def test_called_reads_a_greeting_at_the_start_and_a_comma_name_at_the_end() -> None:
    assert called("Hey Kate!", "Hey Kate!") == ["Kate"]
    assert called("Good morning, Kate. How did it go?", "How did it go?") == ["Kate"]
    assert called("That looks great", "That looks great, Kate!") == ["Kate"]
    assert called("Hey Kate", "Hey Kate") == ["Kate"]  # the name ends the turn
    # not a name: a capitalised word that goes on into the sentence, or one mid-sentence
    assert called("Hey Hows it going", "Hey Hows it going") == []
    assert called("I saw Kate today", "I saw Kate today") == []
    assert called("hey kate", "hey kate") == []  # lower case is not read as a name


def test_aliases_need_two_authors_repetition_and_one_writer() -> None:
    two = frozenset({"Emi", "elise"})
    calls = Counter({("elise", "Kate"): ALIAS_MIN, ("Emi", "Emily"): ALIAS_MIN, ("Emi", "Miami"): 1})
    assert aliases_of(two, calls) == {"kate": "Emi", "emily": "elise"}
    # fewer than ALIAS_MIN times is not a name yet
    assert aliases_of(two, Counter({("elise", "Kate"): ALIAS_MIN - 1})) == {}
    # both write it: a place or a third person, not what one calls the other
    both = Counter({("elise", "Paris"): 5, ("Emi", "Paris"): 1})
    assert aliases_of(two, both) == {}
    # a word of an author's own name is that author's name already
    assert aliases_of(two, Counter({("Emi", "Elise"): 9})) == {}
    # three authors: who is addressed is not known
    assert aliases_of(frozenset({"Emi", "elise", "Bo"}), calls) == {}


def test_an_alias_names_its_author_for_the_search_and_the_prior() -> None:
    authors, aliases = {"Emi", "elise"}, {"kate": "Emi"}
    assert names.without_names("What did Kate cook?", authors, aliases) == "What did cook?"
    assert names.without_names("What did Kate cook?", authors) == "What did Kate cook?"
    assert names.preferred_authors("What did Kate cook?", authors, aliases) == {"Emi"}
    assert names.preferred_authors("What did Kate cook?", authors) == set()
    # the alias and the other author's name: both named, neither favoured
    assert names.preferred_authors("What did Kate and Elise cook?", authors, aliases) == set()
    # an alias names someone only capitalised ("Hey Sunshine!" makes no "sunshine" a name)
    sunny = {"sunshine": "Emi"}
    assert names.without_names("Where did they go on a sunshine day?", authors, sunny).endswith(
        "sunshine day?"
    )
    assert names.preferred_authors("What did Sunshine bake?", authors, sunny) == {"Emi"}
    # an alias of an author not among the candidates names nobody
    assert names.preferred_authors("What did Kate cook?", {"Ann", "Bob"}, aliases) == set()


def _chat(svc: Any, sid: str, turns: list[tuple[str, str]], start: float) -> None:
    svc.import_session(
        {"id": sid, "agent": "chat", "scope": "conv", "scope_id": "c1", "started_at": start},
        [
            {
                "id": f"{sid}-{i}",
                "role": "user" if who == "Emi" else "assistant",
                "content": text,
                "timestamp": start + i,
                "meta": {"speaker": who},
            }
            for i, (who, text) in enumerate(turns)
        ],
    )


def test_recall_learns_an_alias_from_the_chat_and_uses_it(service: Any) -> None:
    """elise greets Emi as "Kate"; once she has done so ALIAS_MIN times, "What did Kate
    cook?" is searched without "Kate" and favours Emi's turns, so Emi's answer beats
    elise's greeting that matched on the name alone."""
    base = 1_700_000_000.0
    _chat(
        service,
        "s0",
        [("elise", "Hey Kate!"), ("Emi", "I cooked a spicy lentil soup for dinner"), ("elise", "yum")],
        base,
    )
    service.sync_index()
    q = "What did Kate cook?"
    before = service.recall(q, scope="conv", scope_id="c1", mode="flat")
    assert before["diagnostics"]["search_query"] == q  # one greeting is not a name yet
    for n in range(1, ALIAS_MIN):
        _chat(service, f"s{n}", [("elise", "Hey Kate!"), ("Emi", "hello")], base + 100 * n)
    service.sync_index()
    on = service.recall(q, scope="conv", scope_id="c1", mode="flat")
    off = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning={"name_aliases": 0})
    assert on["diagnostics"]["search_query"] == "What did cook?"
    assert off["diagnostics"]["search_query"] == q
    by_id = {r["turn_id"]: r for r in on["results"]}
    assert by_id["s0-1"]["score_breakdown"]["speaker"] == 1.0
    assert by_id["s0-0"]["score_breakdown"].get("speaker") == 0.0
    assert by_id["s0-0"]["score_breakdown"]["bm25"] == 0.0  # "Kate" is not searched for
    assert on["results"][0]["turn_id"] == "s0-1"
    off_by_id = {r["turn_id"]: r for r in off["results"]}
    assert off_by_id["s0-0"]["score_breakdown"]["bm25"] > 0.0
    assert "speaker" not in off_by_id["s0-1"]["score_breakdown"]
