"""``memviewer recalls --redact``: the recall log keeps text as it was asked and answered;
the redacted reader masks it on the way out, like an export (issue 32, row 17)."""

from __future__ import annotations

import json
import random
import string
import time

from cli_runs import invoke_on

from memviewer.config import Settings
from memviewer.service import MemoryService

_RNG = random.Random(17)
PW = "Harbor" + "".join(_RNG.choice(string.digits) for _ in range(4)) + "!"
KEY = "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(32))
EMAIL = f"ops{_RNG.randint(10, 99)}@example.org"


def _record(service: MemoryService) -> None:
    service.apply_batch(
        [
            {
                "op": "record_recall",
                "recall_id": "r-secret",
                "ts": time.time(),
                "kind": "recall",
                "query": f"what was my password? I think my password is {PW}",
                "results": [
                    {"text": f"here is my Stripe key {KEY}", "score": 0.9},
                    {"turn_id": "t-x", "score": 0.5},
                ],
                "source": "agent",
                "session_id": f"s-{EMAIL}",
                "params": {"k": 2, "note": f"mail {EMAIL}"},
            }
        ]
    )
    service.close()


def _run(settings: Settings, *args: str) -> str:
    result = invoke_on(settings, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_log_keeps_the_text_the_redacted_reader_masks_it(
    service: MemoryService, settings: Settings
) -> None:
    _record(service)
    plain = _run(settings, "recalls", "show", "r-secret", "--json")
    assert PW in plain and KEY in plain and EMAIL in plain  # stored unredacted, shown so by default
    for level in ("standard", "strict"):
        shown = _run(settings, "recalls", "show", "r-secret", "--json", "--redact", level)
        assert PW not in shown and KEY not in shown and EMAIL not in shown
        entry = json.loads(shown)["recall"]
        assert entry["recall_id"] == "r-secret"  # still usable with `recalls show`
        assert entry["query"].startswith("what was my password? I think my password is [REDACTED:secret:")
        assert entry["results"][0]["text"] == "here is my Stripe key [REDACTED:api_key:1]"
        assert entry["results"][1]["turn_id"] == "t-x" and entry["params"]["k"] == 2
        assert entry["session_id"].startswith("session-")  # the pseudonym an export writes
        listed = _run(settings, "recalls", "--json", "--redact", level)
        assert PW not in listed and EMAIL not in listed
        assert json.loads(listed)["recalls"][0]["recall_id"] == "r-secret"
    table = _run(settings, "recalls", "--redact", "standard")
    assert PW not in table and "my password is [REDACTED:" in table
