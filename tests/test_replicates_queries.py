"""``--queries`` with the replicate engine: not computed, and a note says why (docs/randomness.md section 4)."""

from __future__ import annotations

import mptool
from mptool.inputs.known_answer import MODULE, known_frame, known_spec


def test_queries_are_not_computed_and_a_note_says_why() -> None:
    df = known_frame(0)[0]
    res = mptool.pdtp(df, known_spec(0), allow_import=(MODULE,), queries="train", replicates="2:2", jobs=1)
    assert res.summary["engine"] == "replicates"
    assert "dtp_queries" not in res.table and "queries" not in res.summary["dtp"]
    note = [n for n in res.summary["replicates"]["notes"] if n.startswith("--queries")]
    assert len(note) == 1 and "biased upward by the training randomness" in note[0]
