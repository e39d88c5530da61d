"""One validation layer for everything a user types on the command line.

Every numeric or free-text flag of every subcommand goes through a function here before
any work starts (issue 12, "a gate fails closed"): a value that is not clearly valid (NaN,
inf, out of range, malformed) is an :class:`InputError` (exit 2, one line naming the flag).
The spec's own values use the same ranges (``mptool.spec`` imports them from here), so a
flag and the spec key it overrides are held to one rule.

The CLI calls one function per flag group at the top of each command:
:func:`check_run_flags` (pdtp, reduce-dtp, attack), :func:`check_pdtp_flags`,
:func:`check_reduce_flags`, :func:`check_attack_flags`, :func:`check_purchase_flags`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Any

from mptool.runtime.errors import InputError

#: Output bin width (Long et al. section 5.2): 0 (no binning) or within these bounds. Below
#: 1e-4 the bins are finer than any probability estimate is meaningful and ``1/b`` bins
#: overflow for tiny b; above 0.5 there is a single useful bin and every ratio is 1.
BIN_SIZE_MIN = 1e-4
BIN_SIZE_MAX = 0.5
#: Seeds feed numpy and scikit-learn, whose ``random_state`` takes 0 .. 2**32 - 1.
SEED_MAX = 2**32 - 1
#: ``--jobs`` without ``--scheduler`` may ask for at most this many workers per local core.
JOBS_PER_CORE = 4
#: ``--jobs`` with ``--scheduler`` (a cluster): an upper bound that only stops absurd values.
JOBS_CLUSTER_MAX = 65_536
#: Upper bounds of the attack protocol's counts (Long et al. section 5.4 uses 10 iterations,
#: 100 targets, a few thousand candidates); far above any real run, they stop a typo such as
#: ``--iterations 10000000`` from allocating gigabytes before the first fit.
ATTACK_MAX = {
    "candidates": 10_000_000,
    "iterations": 10_000,
    "targets": 1_000_000,
    "shadows": 10_000,
    "pairs": 1_000,
    "shadow_pool": 10_000,
    "pdtp_iterations": 10_000,
}
#: Attack counts that may be 0 (off).
ATTACK_MAY_BE_ZERO = ("shadow_pool", "pdtp_iterations")
#: The protocol keeps an iterations x candidates membership matrix (one byte per cell).
ATTACK_CELLS_MAX = 200_000_000
#: ``--shadow-data synthesize[:Q]`` (Shokri et al. V-C, Algorithm 1): Q = queries of the target model
#: allowed per synthetic record (the paper's iter_max; it reports 156 on average for purchase records).
#: The default leaves room for that; the cap only stops typos. The run's total is capped too.
SYNTH_QUERIES_DEFAULT = 1000
SYNTH_QUERIES_MAX = 100_000
SYNTH_TOTAL_QUERIES_MAX = 100_000_000
#: pdtp --gate: the scale the DTP-1 verdict is taken on (binned = Long et al. 5.2, the default).
GATES = ("binned", "raw")
#: pdtp --noise-floor: records refitted with their row moved; far above any useful sample.
NOISE_FLOOR_MAX = 1_000_000
#: ``attack --budget``: seconds, finite and above 0; the upper bound (about 116 days) only stops typos.
BUDGET_MAX_S = 10_000_000
#: Orders of the refit engine (``--order``): screened riskiest first, or the order of T.
REFIT_ORDERS = ("risk", "row")
#: reduce-dtp: removal steps in the trace.
MAX_REMOVALS_MAX = 1_000_000
#: datasets make-purchase: records x features cells (float64 draws before the 0/1 cast).
PURCHASE_CELLS_MAX = 50_000_000

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
_SCHEDULER = re.compile(rf"^(?:(?P<scheme>tcp|tls|ucx|ws|wss)://)?(?P<host>{_HOST}):(?P<port>[0-9]{{1,5}})/?$")


def bin_size_problem(value: float) -> str | None:
    """Why ``value`` is not a usable output bin width (section 5.2), or None when it is."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return f"must be a finite number (got {value!r})"
    if value == 0 or BIN_SIZE_MIN <= value <= BIN_SIZE_MAX:
        return None
    return (
        f"must be 0 (no binning) or between {BIN_SIZE_MIN:g} and {BIN_SIZE_MAX:g}, "
        f"e.g. 0.01 as in Long et al. 5.2 (got {value!r})"
    )


def seed_problem(value: int) -> str | None:
    """Why ``value`` is not a seed (a whole number 0 .. 2**32 - 1), or None when it is."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        return f"a seed must be a whole number from 0 to {SEED_MAX} (got {value!r})"
    return None


def check_bin_size(value: float | None, flag: str = "--bin-size") -> None:
    """``--bin-size``: None (keep the spec's) or a usable bin width."""
    if value is not None and (why := bin_size_problem(value)):
        raise InputError(f"{flag} {why}")


def check_seed(value: int | None, flag: str = "--seed") -> None:
    """``--seed``: None (keep the spec's) or a whole number 0 .. 2**32 - 1."""
    if value is not None and (why := seed_problem(value)):
        raise InputError(f"{flag}: {why}")


def check_threshold(value: float, flag: str = "--threshold") -> None:
    """DTP-1 threshold on PDTP (a log-ratio, Long et al. Definition 4.4): finite and above 0."""
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag} must be a finite number above 0, e.g. 1.0 for DTP-1 (got {value})")


def check_count(value: int | None, flag: str, minimum: int, maximum: int | None = None) -> None:
    """A whole-number flag within ``[minimum, maximum]`` (None = the flag was not given)."""
    if value is None:
        return
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum:,}" if maximum is not None else ""
        raise InputError(f"{flag} must be at least {minimum}{upper} (got {value})")


def check_rate(value: float | None, flag: str) -> None:
    """A rate such as ``--max-auc``: None or a finite number in [0, 1]."""
    if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InputError(f"{flag} must be a number between 0 and 1 (got {value})")


def check_jobs(jobs: int, scheduler: str | None = None, flag: str = "--jobs") -> None:
    """``--jobs``: 0 = every core; at most ``JOBS_PER_CORE`` x the local cores without ``--scheduler``."""
    if jobs < 0:
        raise InputError(f"{flag} must be 0 (every core) or a positive number (got {jobs})")
    cores = os.cpu_count() or 1
    if not scheduler and jobs > JOBS_PER_CORE * cores:
        raise InputError(
            f"{flag} {jobs} is more than {JOBS_PER_CORE} workers per core of this machine ({cores} cores); "
            f"use {flag} 0 for every core, or {'--scheduler' if flag.startswith('--') else 'scheduler'} "
            "to run on a cluster"
        )
    if jobs > JOBS_CLUSTER_MAX:
        raise InputError(f"{flag} must be at most {JOBS_CLUSTER_MAX:,} (got {jobs})")


def check_scheduler(address: str | None, flag: str = "--scheduler") -> None:
    """``--scheduler``: a Dask scheduler's HOST:PORT with an optional scheme (tcp://, tls:// ...).

    Checked by form only, before any connection is tried, so a typo fails at once.
    """
    if address is None:
        return
    m = _SCHEDULER.match(address)
    if m is None or not 1 <= int(m.group("port")) <= 65535:
        shown = address if len(address) <= 60 else address[:60] + "..."
        raise InputError(
            f"{flag} {shown!r} is not an address of the form tcp://HOST:PORT "
            "(e.g. tcp://10.0.0.5:8786, the address of a Dask scheduler)"
        )


def check_allow_import(modules: Sequence[str] | None, flag: str = "--allow-import") -> None:
    """``--allow-import``: each a dotted Python module name such as ``xgboost`` or ``mypkg.models``."""
    for name in modules or ():
        if not _MODULE.match(name):
            shown = name if len(name) <= 60 else name[:60] + "..."
            raise InputError(f"{flag} {shown!r} is not a module name; give a dotted module path such as xgboost")


def check_run_flags(
    *, jobs: int, scheduler: str | None, seed: int | None, bin_size: float | None, allow_import: Sequence[str] | None
) -> None:
    """Flags shared by pdtp, reduce-dtp and attack."""
    check_jobs(jobs, scheduler)
    check_scheduler(scheduler)
    check_seed(seed)
    check_bin_size(bin_size)
    check_allow_import(allow_import)


def check_order(value: str, flag: str = "--order") -> None:
    """``--order``: the refit engine's order, ``risk`` (screened riskiest first) or ``row``."""
    if not isinstance(value, str) or value not in REFIT_ORDERS:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        raise InputError(f"{flag} must be one of {', '.join(REFIT_ORDERS)} (got {shown})")


def check_fail_fast(value: bool, flag: str = "--fail-fast") -> None:
    """``--fail-fast``: a switch; the API's ``fail_fast`` must be a real bool (not e.g. the string "no")."""
    if not isinstance(value, bool):
        shown = repr(value)
        raise InputError(f"{flag} must be True or False (got {shown if len(shown) <= 40 else shown[:40] + '...'})")


def check_trained(path: object | None, flag: str = "--trained") -> None:
    """``--trained``: None, or an existing file (a skops archive or an ONNX graph, checked when it is read)."""
    if path is None:
        return
    if not os.path.isfile(str(path)):
        what = ("is a folder" if os.path.isdir(str(path)) else "not a regular file (a pipe, device or socket)"
                if os.path.exists(str(path)) else "not found")
        raise InputError(f"{flag} {path}: {what}; give the model file saved with skops.io.dump (or exported to ONNX)")


#: --untargeted-features choices (:mod:`mptool.attacks.untargeted`).
UNTARGETED_FEATURES = ("auto", "xyq", "yq")


def check_untargeted_features(value: str, flag: str = "--untargeted-features") -> None:
    """``--untargeted-features``: ``auto``, ``xyq`` (Long et al.) or ``yq`` (Shokri et al.)."""
    if not isinstance(value, str) or value not in UNTARGETED_FEATURES:
        shown = str(value) if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InputError(f"{flag} must be one of {', '.join(UNTARGETED_FEATURES)} (got {shown!r})")


def check_gate(value: str, flag: str = "--gate") -> None:
    """``--gate``: ``binned`` (the paper's binned PDTP, default) or ``raw`` (unbinned PDTP)."""
    if not isinstance(value, str) or value not in GATES:
        shown = str(value) if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InputError(f"{flag} must be {' or '.join(GATES)} (got {shown!r})")


def check_fail_fast_gate(fail_fast: bool, baseline: object, waivers: object) -> None:
    """``--fail-fast`` excludes ``--baseline``/``--waivers``: their gate judges every record.

    A stop at a violator the baseline already knows, or one a waiver covers, would leave the
    gate with nothing counted and the other records unchecked: a pass nobody checked.
    """
    given = [flag for flag, value in (("--baseline", baseline), ("--waivers", waivers)) if value is not None]
    if fail_fast and given:
        raise InputError(
            f"--fail-fast and {' and '.join(given)} exclude each other: the gate judges every record, and a run "
            "stopped at a known or waived violator would check none of the rest; drop one"
        )


def check_pdtp_flags(
    *,
    threshold: float,
    train_size: int | None,
    sample: int | None,
    gate: str = "binned",
    noise_floor: int | None = None,
    baseline_or_waivers: bool = False,
    order: str = "risk",
    fail_fast: bool = False,
    trained: object | None = None,
) -> None:
    """``mptool pdtp``: threshold, training-set size, sample size, gate, noise-floor records, order,
    fail-fast, the --trained file.

    ``--gate raw`` is refused with ``--baseline``/``--waivers``: their gate compares the binned
    PDTP of this run with a baseline run's, and mixing the scales would gate on neither.
    """
    check_trained(trained)
    check_threshold(threshold)
    check_count(train_size, "--train-size", 2)
    check_count(sample, "--sample", 1)
    check_gate(gate)
    check_count(noise_floor, "--noise-floor", 0, NOISE_FLOOR_MAX)
    check_order(order)
    check_fail_fast(fail_fast)
    if gate == "raw" and baseline_or_waivers:
        raise InputError(
            "--gate raw cannot be combined with --baseline or --waivers (their gate compares binned PDTP "
            "across runs); use --gate binned, or drop --baseline/--waivers"
        )


def check_reduce_flags(*, threshold: float, train_size: int | None, max_removals: int) -> None:
    """``mptool reduce-dtp``: threshold, training-set size and removal budget."""
    check_threshold(threshold)
    check_count(train_size, "--train-size", 2)
    check_count(max_removals, "--max-removals", 0, MAX_REMOVALS_MAX)


def check_budget(value: float | None, flag: str = "--budget") -> None:
    """``attack --budget``: None (no budget) or seconds, finite, above 0 and at most ``BUDGET_MAX_S``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{flag} must be a number of seconds (got {value!r})")
    if not 0 < value <= BUDGET_MAX_S:
        raise InputError(f"{flag} must be above 0 and at most {BUDGET_MAX_S:,} seconds (got {value:g})")


def check_attack_flags(
    *,
    counts: dict[str, int | None],
    max_accuracy: float | None,
    max_auc: float | None,
    budget: float | None = None,
    dashes: bool = True,
) -> None:
    """``mptool attack``: every count positive and bounded (``ATTACK_MAX``), the gates in [0, 1],
    the budget in seconds.

    ``counts`` maps count names (``candidates``, ``shadow_pool`` ...) to values (None = the
    default, resolved later); errors name them as flags (``--shadow-pool``) or, with
    ``dashes`` False, as the API's parameters.
    """

    def name(key: str) -> str:
        return "--" + key.replace("_", "-") if dashes else key

    for key, value in counts.items():
        check_count(value, name(key), 0 if key in ATTACK_MAY_BE_ZERO else 1, ATTACK_MAX[key])
    cells = (counts.get("iterations") or 1) * (counts.get("candidates") or 1)
    if cells > ATTACK_CELLS_MAX:
        raise InputError(
            f"{name('iterations')} x {name('candidates')} is {cells:,}, more than {ATTACK_CELLS_MAX:,}; "
            "lower one of them"
        )
    check_rate(max_accuracy, name("max_accuracy"))
    check_rate(max_auc, name("max_auc"))
    check_budget(budget, name("budget"))


def check_attribute_values(value: object, attacks: tuple[str, ...], flag: str = "--attribute-values") -> None:
    """``attack --attribute-values``: a bool, and only with ``attribute:COLUMN`` among the attacks
    (it writes that column's true and inferred values; without the attack there is nothing to write)."""
    if not isinstance(value, bool):
        raise InputError(f"{flag} must be True or False (got {value!r})")
    if value and not any(str(a).startswith("attribute:") for a in attacks):
        raise InputError(f"{flag} writes the values of attribute:COLUMN; add attribute:COLUMN to --attacks")



#: Largest --rmia-gamma (a pairwise likelihood ratio; beyond this no population record is ever beaten).
RMIA_GAMMA_MAX = 1e6


def check_rmia_flags(gamma: float, offline_a: str | float | None, dashes: bool = True) -> float | None:
    """``attack --rmia-gamma`` (finite, above 0, at most RMIA_GAMMA_MAX) and ``--rmia-offline-a``
    (``auto``/None = tuned on the reference models, or a number in [0, 1]); returns a, None for auto."""
    g_flag, a_flag = ("--rmia-gamma", "--rmia-offline-a") if dashes else ("rmia_gamma", "rmia_offline_a")
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not math.isfinite(gamma):
        raise InputError(f"{g_flag} must be a finite number above 0 (got {gamma!r})")
    if not 0 < gamma <= RMIA_GAMMA_MAX:
        raise InputError(f"{g_flag} must be above 0 and at most {RMIA_GAMMA_MAX:g} (got {gamma:g})")
    if offline_a is None or (isinstance(offline_a, str) and offline_a.strip().lower() == "auto"):
        return None
    try:
        a = float(offline_a) if not isinstance(offline_a, bool) else float("nan")
    except (TypeError, ValueError):
        a = float("nan")
    if not (math.isfinite(a) and 0.0 <= a <= 1.0):
        raise InputError(f"{a_flag} must be 'auto' or a number from 0 to 1 (got {str(offline_a)[:40]!r})")
    return a


def check_purchase_flags(*, rows: int, features: int, classes: int, segments: int, seed: int) -> None:
    """``mptool datasets make-purchase``: sizes positive and bounded, a valid seed."""
    check_seed(seed)
    check_count(rows, "--rows", 2)
    check_count(features, "--features", 2)
    check_count(classes, "--classes", 2, 10_000)
    check_count(segments, "--segments", 1, 10_000)
    if rows * features > PURCHASE_CELLS_MAX:
        raise InputError(
            f"--rows x --features is {rows * features:,}, more than {PURCHASE_CELLS_MAX:,}; lower one of them"
        )


def check_operation(
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    allow_import: Sequence[str] = (),
    threshold: float | None = None,
    sample: int | None = None,
    max_removals: int | None = None,
    gate: str = "binned",
    noise_floor: int | None = None,
    order: str | None = None,
    fail_fast: bool | None = None,
) -> None:
    """The same rules for the Python API (``mptool.pdtp``, ``attack``, ``reduce_dtp``), naming its parameters."""
    check_jobs(jobs or 0, scheduler, flag="jobs")
    check_scheduler(scheduler, flag="scheduler")
    check_allow_import(allow_import, flag="allow_import")
    if threshold is not None:
        check_threshold(threshold, "threshold")
    check_count(sample, "sample", 1)
    check_count(max_removals, "max_removals", 0, MAX_REMOVALS_MAX)
    check_gate(gate, "gate")
    if noise_floor is not None and (isinstance(noise_floor, bool) or not isinstance(noise_floor, int)):
        raise InputError(f"noise_floor must be a whole number of records or None (got {noise_floor!r})")
    check_count(noise_floor, "noise_floor", 0, NOISE_FLOOR_MAX)
    if order is not None:
        check_order(order, "order")
    if fail_fast is not None:
        check_fail_fast(fail_fast, "fail_fast")


#: Output formats of ``--format`` on pdtp, attack and reduce-dtp: csv and json are always written.
OUTPUT_FORMATS = ("csv", "json", "junit")
#: Largest ``--baseline-tolerance`` / ``diff --tolerance`` (nats): the binned PDTP never exceeds ln(199) ~ 5.29.
TOLERANCE_MAX = 10.0
#: ``--baseline-tolerance`` default: a PDTP rise (nats) within which a known violation is unchanged.
DEFAULT_TOLERANCE = 0.05


def check_formats(text: str, flag: str = "--format") -> set[str]:
    """``--format``: comma-separated names from :data:`OUTPUT_FORMATS` (``junit`` adds junit.xml)."""
    names = [part.strip() for part in str(text).split(",")]
    bad = [n for n in names if n not in OUTPUT_FORMATS]
    if bad or not names:
        shown = bad[0] if bad else text
        raise InputError(
            f"{flag} takes {', '.join(OUTPUT_FORMATS)} or a comma-separated list of them, e.g. csv,junit "
            f"(got {shown[:40]!r})"
        )
    return set(names)


def check_tolerance(value: float, flag: str = "--baseline-tolerance") -> None:
    """A PDTP tolerance in nats: finite, 0 .. :data:`TOLERANCE_MAX`."""
    if not math.isfinite(value) or not 0.0 <= value <= TOLERANCE_MAX:
        raise InputError(f"{flag} must be a number from 0 to {TOLERANCE_MAX:g} (nats of PDTP), e.g. 0.05 (got {value})")


def check_ci_flags(*, formats: str, tolerance: float, baseline: object, waivers: object) -> set[str]:
    """``--format``, ``--baseline-tolerance`` (only meaningful with ``--baseline``); the formats asked for."""
    chosen = check_formats(formats)
    check_tolerance(tolerance)
    for flag, value in (("--baseline", baseline), ("--waivers", waivers)):
        if value is not None and not str(value):
            raise InputError(f"{flag} needs a path")
    return chosen


def check_synthesize(text: str, flag: str = "--shadow-data") -> int | None:
    """``synthesize`` or ``synthesize:Q`` (Q whole, 1 .. SYNTH_QUERIES_MAX): the query budget per
    synthetic record; None when ``text`` names another source."""
    if text != "synthesize" and not text.startswith("synthesize:"):
        return None
    if text == "synthesize":
        return SYNTH_QUERIES_DEFAULT
    raw = text.split(":", 1)[1]
    if not re.fullmatch(r"[0-9]{1,9}", raw) or not 1 <= int(raw) <= SYNTH_QUERIES_MAX:
        raise InputError(
            f"{flag} synthesize:Q takes Q, the queries allowed per synthetic record, a whole number from 1 to "
            f"{SYNTH_QUERIES_MAX:,} (got {raw[:40]!r})"
        )
    return int(raw)


def check_synthesis_total(records: int, per_record: int, flag: str = "--shadow-data") -> None:
    """The run's query budget (records x Q) at most SYNTH_TOTAL_QUERIES_MAX."""
    if records * per_record > SYNTH_TOTAL_QUERIES_MAX:
        raise InputError(
            f"{flag} synthesize:{per_record}: {records:,} records x {per_record:,} queries is more than "
            f"{SYNTH_TOTAL_QUERIES_MAX:,} queries; lower Q or --candidates"
        )


def check_target(value: Any, flag: str = "--target") -> None:
    """``mitigate --target``: the largest max PDTP accepted, a finite number above 0 (1.0 = DTP-1)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag} must be a finite number above 0, e.g. 1.0 for DTP-1 (got {value!r})")


def check_defences(text: Any, known: Sequence[str], flag: str = "--defences") -> tuple[str, ...]:
    """``mitigate --defences``: 'all' or a comma list of ``known`` families, each once, in ``known``'s order."""
    if isinstance(text, str):
        items = [t.strip() for t in text.split(",")]
    elif isinstance(text, list | tuple) and all(isinstance(t, str) for t in text):
        items = [t.strip() for t in text]
    else:
        raise InputError(f"{flag} is 'all' or a comma list of {', '.join(known)} (got {text!r})")
    if items == ["all"]:
        return tuple(known)
    bad = [t for t in items if t not in known]
    if not items or bad or len(set(items)) != len(items):
        got = bad[0] if bad else ",".join(items)
        raise InputError(f"{flag} is 'all' or a comma list of {', '.join(known)}, each once (got '{got}')")
    return tuple(t for t in known if t in items)


def check_mitigate_flags(
    *, target: float, sample: int | None, max_removals: int | None, train_size: int | None
) -> None:
    """``mptool mitigate``: target, sample, removal budget and training-set size."""
    check_target(target)
    check_count(sample, "--sample", 1)
    check_count(max_removals, "--max-removals", 0, MAX_REMOVALS_MAX)
    check_count(train_size, "--train-size", 2)
