#!/usr/bin/env bash
# mptool's CI gate (run by action.yml; runs as well on any CI or a laptop).
#
#   MPTOOL_DATA=data.csv MPTOOL_SPEC=spec.yaml scripts/ci-gate.sh
#
# Runs 'mptool pdtp' with --format junit (plus --baseline / --waivers when given), then
# 'mptool report' (report.html and report.md in the output folder), appends the Markdown
# summary to $GITHUB_STEP_SUMMARY when that is set, writes exit-code/verdict/report to
# $GITHUB_OUTPUT when that is set, and exits with pdtp's code: 0 pass, 1 finding,
# 2 bad input, 3 internal error. A report that cannot be written never turns a gate into
# a pass: with pdtp at 0, the report's failure code is returned (2 or 3; any other, such as 1 from
# a crash or a signal's, as 3: the report failing is never read as a finding).
#
# The gate publishes only a verdict this run computed: the output folder must be new or empty
# (a pull request that commits a results folder is refused, exit 2, before pdtp starts), and the
# folder is reported only when pdtp exited 0 or 1 (it writes its results then and only then);
# any other code gives the "did not finish" step summary, never whatever files the folder holds.
#
# Inputs (environment; empty = not given):
#   MPTOOL_DATA       dataset CSV (required)
#   MPTOOL_SPEC       model spec YAML (required)
#   MPTOOL_THRESHOLD  DTP-1 threshold [1.0]
#   MPTOOL_BASELINE   a previous run's folder or pdtp.json
#   MPTOOL_TOLERANCE  --baseline-tolerance [0.05]
#   MPTOOL_WAIVERS    waiver YAML file
#   MPTOOL_OUT        output folder [mptool-report]; must be new or empty (else exit 2)
#   MPTOOL_KEY_INPUT  fingerprint key; when non-empty it becomes MPTOOL_FINGERPRINT_KEY (else that
#                     variable is left as the environment has it)
#   MPTOOL_BIN        the mptool command [mptool]
set -uo pipefail

data="${MPTOOL_DATA:-}"
spec="${MPTOOL_SPEC:-}"
out="${MPTOOL_OUT:-mptool-report}"
mptool_bin="${MPTOOL_BIN:-mptool}"
if [ -z "$data" ] || [ -z "$spec" ]; then
    echo "mptool: error: ci-gate.sh needs MPTOOL_DATA (dataset CSV) and MPTOOL_SPEC (model spec YAML)" >&2
    exit 2
fi

case "$out" in
    -*|*[[:cntrl:]]*)  # a newline would add its own lines to $GITHUB_OUTPUT (verdict=pass, say); "--help" an option
        echo "mptool: error: ci-gate.sh: MPTOOL_OUT starts with '-' or contains a control character (a newline, say); give a plain folder name such as mptool-report" >&2
        if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
            printf '## :x: mptool pdtp did not finish (exit code 2)\n\nSee the job log for the error line.\n' \
                >> "$GITHUB_STEP_SUMMARY"
        fi
        if [ -n "${GITHUB_OUTPUT:-}" ]; then
            printf 'exit-code=2\nverdict=error\n' >> "$GITHUB_OUTPUT"
        fi
        exit 2 ;;
esac

if [ -n "${MPTOOL_KEY_INPUT:-}" ]; then
    export MPTOOL_FINGERPRINT_KEY="$MPTOOL_KEY_INPUT"
fi
unset MPTOOL_KEY_INPUT

summarize_unfinished() {  # $1: the exit code; the step summary and outputs of a gate that computed no verdict
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        printf '## :x: mptool pdtp did not finish (exit code %s)\n\nSee the job log for the error line.\n' "$1" \
            >> "$GITHUB_STEP_SUMMARY"
    fi
    if [ -n "${GITHUB_OUTPUT:-}" ]; then
        printf 'exit-code=%s\nverdict=error\nreport=%s\n' "$1" "$out" >> "$GITHUB_OUTPUT"
    fi
}

if [ -e "$out" ] && { [ ! -d "$out" ] || [ -n "$(ls -A -- "$out" 2>/dev/null)" ]; }; then
    echo "mptool: error: ci-gate.sh: MPTOOL_OUT ($out) already exists and is not an empty folder; the gate reports only what its own run writes: give a new or empty folder" >&2
    summarize_unfinished 2
    exit 2
fi

args=(pdtp "$data" --model "$spec" --out "$out" --threshold "${MPTOOL_THRESHOLD:-1.0}" --format junit --quiet)
if [ -n "${MPTOOL_BASELINE:-}" ]; then
    args+=(--baseline "$MPTOOL_BASELINE" --baseline-tolerance "${MPTOOL_TOLERANCE:-0.05}")
fi
if [ -n "${MPTOOL_WAIVERS:-}" ]; then
    args+=(--waivers "$MPTOOL_WAIVERS")
fi

$mptool_bin "${args[@]}"
code=$?

if [ "$code" -eq 0 ] || [ "$code" -eq 1 ]; then  # only then did pdtp write its results into $out
    $mptool_bin report "$out" --format both --quiet
    report_code=$?
    pdtp_code=$code
    if [ "$report_code" -eq 0 ] && [ ! -f "$out/report.md" ]; then
        report_code=3  # it exited 0 without writing the report: never a pass without one
    fi
    if [ "$report_code" -ne 0 ] && [ "$code" -eq 0 ]; then
        case "$report_code" in
            2|3) code=$report_code ;;
            *) code=3 ;;  # a crash (1) or a signal: an internal error, never 1 (a DTP-1 finding)
        esac
    fi
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        if [ "$report_code" -eq 0 ] && [ -f "$out/report.md" ]; then
            cat "$out/report.md" >> "$GITHUB_STEP_SUMMARY"
        else  # pdtp finished, its report did not: say so (the gate's code is the report's when pdtp passed)
            printf '## :x: mptool report failed (exit code %s) after mptool pdtp exited %s\n\nThe gate exits %s. See the job log for the error line.\n' \
                "$report_code" "$pdtp_code" "$code" >> "$GITHUB_STEP_SUMMARY"
        fi
    fi
else
    summarize_unfinished "$code"
    exit "$code"
fi

case "$code" in
    0) verdict=pass ;;
    1) verdict=fail ;;
    *) verdict=error ;;
esac
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
        echo "exit-code=$code"
        echo "verdict=$verdict"
        echo "report=$out"
    } >> "$GITHUB_OUTPUT"
fi
exit "$code"
