"""Chunks of refits bounded in time (runtime.parallel.chunk_limit): never a change in the results.

A chunk of refits is planned to last at most ``CHUNK_SECONDS`` by the timed fit of A(T), so a long audit
(the network's 1,000 records: 4,000 fits of about a second in one look) saves its checkpoint and shows
progress as it goes instead of in eight chunks of 500 fits. Here the limit is forced to one fit a chunk
and the refit and replicate engines' pdtp.csv must be the same bytes as with the default chunks.
Known-answer data (26 rows), ``--jobs 1``, every run in this process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import run_cli

import mptool.loo.refit as refit
import mptool.loo.replicates as replicates
import mptool.runtime.parallel as parallel
from mptool.inputs.known_answer import MODULE, known_frame, known_spec


def test_chunk_positions_keeps_its_count_and_splits_further_only_past_the_limit() -> None:
    pos = np.arange(100)
    assert [len(c) for c in parallel.chunk_positions(pos, 2, per_job=4)] == [13, 13, 13, 13, 12, 12, 12, 12]
    small = parallel.chunk_positions(pos, 2, per_job=4, max_items=5)
    assert len(small) == 20 and max(map(len, small)) == 5
    assert np.array_equal(np.concatenate(small), pos)  # every item once, in order
    assert [len(c) for c in parallel.chunk_positions(pos, 2, per_job=4, max_items=50)] == [13] * 4 + [12] * 4
    assert parallel.chunk_positions(np.arange(3), 4, max_items=1) == [np.array([0]), np.array([1]), np.array([2])]


def test_chunk_limit_from_the_fit_time() -> None:
    assert parallel.chunk_limit(0.0) is None  # not timed: the chunks as before
    assert parallel.chunk_limit(parallel.CHUNK_SECONDS / 4) == 4
    assert parallel.chunk_limit(parallel.CHUNK_SECONDS * 3) == 1  # a fit longer than the limit: one a chunk


def test_ramp_chunks_are_capped_too() -> None:
    todo = np.arange(200)
    sizes = [len(c) for c in refit.ramp_chunks(todo, 2, max_items=3)]
    assert sizes[:4] == [1, 1, 2, 2] and max(sizes) == 3 and sum(sizes) == 200
    assert max(len(c) for c in refit.ramp_chunks(todo, 2)) == 13  # no limit: up to the usual size


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("chunks")
    known_frame(0)[0].to_csv(d / "d.csv", index=False)
    (d / "s.yaml").write_text(yaml.safe_dump(known_spec()))
    return d, d / "d.csv", d / "s.yaml"


@pytest.mark.parametrize("engine", [("--engine", "refit"), ("--replicates", "4:8")], ids=["refit", "replicates"])
def test_one_fit_a_chunk_gives_the_same_bytes(data, engine, monkeypatch: pytest.MonkeyPatch) -> None:
    d, csv, spec = data
    name = engine[-1].replace(":", "-")

    def run(out: Path) -> bytes:
        res = run_cli("pdtp", csv, "-m", spec, "--allow-import", MODULE, "--out", out, "--jobs", "1", "-q", *engine)
        assert res.code in (0, 1), res.stderr
        return (out / "pdtp.csv").read_bytes()

    default = run(d / f"default-{name}")
    seen: list[int] = []
    module = refit if engine[0] == "--engine" else replicates

    def spy(*args, **kwargs):
        chunks = parallel.chunk_positions(*args, **kwargs)
        seen.extend(len(c) for c in chunks)
        return chunks

    monkeypatch.setattr(parallel, "CHUNK_SECONDS", 1e-12)  # every fit takes longer than that: one fit a chunk
    monkeypatch.setattr(module, "chunk_positions", spy)
    assert run(d / f"one-{name}") == default
    assert seen and set(seen) == {1}
