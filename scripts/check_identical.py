"""Are pdtp.csv, attack.csv and reduce.csv byte-identical between a git revision and this tree?

For every bundled config (configs/adult-*.yaml) this runs ``mptool pdtp``, ``attack`` and
``reduce-dtp`` on small, fixed slices of the bundled Adult data, once with the code of
``--base REV`` (checked out into a temporary git worktree) and once with this working tree,
and compares the SHA-256 of each result CSV. Used to show that a behaviour-preserving
change (the issue 17 restructure) is behaviour-preserving. Prints one line per run and a
final ``N identical, M different`` line; exits 1 when any differs.

    python scripts/check_identical.py --base 472d29b [--configs adult-nb,adult-lr] [--commands pdtp,reduce-dtp]

``--show-values`` runs this tree's pdtp and attack with ``--show-values``: since issue 26 the
label and worst_class columns are written only then, and with it the files must be
byte-identical to those of a revision before that change.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [
    "adult-nb", "adult-lr", "adult-nn", "adult-gnb", "adult-bnb", "adult-mnb", "adult-knn", "adult-dt", "adult-rf",
]
SLOW = {"adult-nn", "adult-rf", "adult-lr"}  # refit engines: smaller slices

RUNS = {
    "pdtp": (["--train-size", "300", "--sample", "40"], "pdtp.csv"),
    "attack": (
        ["--attacks", "distance,threshold,lira", "--candidates", "200", "--iterations", "2", "--targets", "10",
         "--shadow-pool", "16", "--shadows", "2", "--pdtp-iterations", "1"],
        "attack.csv",
    ),
    "reduce-dtp": (["--train-size", "200", "--max-removals", "3"], "reduce.csv"),
}


#: Commands that take --show-values (the label column is opt-in since issue 26).
SHOW_VALUES = {"pdtp", "attack"}


def run(tree: Path, command: str, config: str, out: Path, flags: tuple[str, ...] = ()) -> str:
    """Run one command with the code in ``tree`` (and ``flags``); the SHA-256 of its result CSV (or the failure)."""
    extra, result = RUNS[command]
    if command == "pdtp" and config in SLOW:
        extra = ["--train-size", "200", "--sample", "12"]
    if command == "reduce-dtp" and config in SLOW:
        extra = ["--train-size", "60", "--max-removals", "2"]
    data = ROOT / "mptool" / "data" / "adult.csv.gz"
    spec = ROOT / "mptool" / "configs" / f"{config}.yaml"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-m", "mptool", command, str(data), "--model", str(spec), "--out", str(out),
            "--jobs", "1", "--quiet", *extra, *flags]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tree)
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return hashlib.sha256((out / result).read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--commands", default=",".join(RUNS))
    parser.add_argument("--show-values", action="store_true",
                        help="run this tree's pdtp and attack with --show-values (the base without)")
    args = parser.parse_args()
    same = differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.base], check=True)
        try:
            for config in args.configs.split(","):
                for command in args.commands.split(","):
                    a = run(base, command, config, Path(tmp) / f"a-{config}-{command}")
                    flags = ("--show-values",) if args.show_values and command in SHOW_VALUES else ()
                    b = run(ROOT, command, config, Path(tmp) / f"b-{config}-{command}", flags)
                    ok = a == b and not a.startswith("exit")
                    same, differ = same + ok, differ + (not ok)
                    print(f"{config:<10} {command:<11} {'identical' if ok else 'DIFFERENT'}  {a[:16]}  {b[:16]}",
                          flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    print(f"{same} identical, {differ} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
