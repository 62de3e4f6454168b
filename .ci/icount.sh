#!/usr/bin/env bash
# The instruction-count gate (issue 41; docs/PERFORMANCE.md, "Instruction
# counts"): the hot paths of benches/icount.c, through libtessera.so's C
# API, counted by valgrind's callgrind (deterministic, where a timing on a
# shared 2-core machine cannot resolve a few percent) and compared with
# benches/icount_baseline.txt. Fails when any case costs more than
# ICOUNT_LIMIT percent (3) over its baseline, naming the case; prints the
# table always.
#
#   .ci/icount.sh                   # build (dist profile), count, compare
#   ICOUNT_UPDATE=1 .ci/icount.sh   # count and rewrite the baseline
#   ICOUNT_OUT=DIR .ci/icount.sh    # keep callgrind's files in DIR, one per
#                                   # case (callgrind_annotate DIR/cg.out.N)
#
# The library is the dist profile's (CMake's default, what is installed
# and what benches/run.sh measures; one codegen unit, so an unrelated
# edit does not move functions between units and change the inlining).
# In CI the CMake stage has built it before: cargo only checks it here.
#
# What could make counts differ between runs or machines is held fixed:
# the program runs with an empty environment (env -i: no TSR_* or
# TESSERA_* variable, the same stack contents) from a scratch directory,
# with one thread; valgrind shows the program one virtual CPU on every
# host with AVX2, so the kernels' and glibc's run-time dispatch pick the
# same code (the CPU seen is printed and recorded in the baseline, with
# the rustc and valgrind versions: a difference is reported beside the
# table, since counts are only comparable with the same toolchain).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
baseline=benches/icount_baseline.txt
limit=${ICOUNT_LIMIT:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command -v valgrind >/dev/null || { echo "icount.sh: valgrind is needed" >&2; exit 1; }

cargo build --profile dist --lib
scripts/link-soname.sh target/dist >/dev/null
lib=$root/target/dist
${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -Iinclude benches/icount.c \
    -L"$lib" -ltessera -Wl,-rpath,"$lib" -o "$work/icount"

out=${ICOUNT_OUT:-$work/cg}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/cg.out*
start=$SECONDS
(cd "$work" && env -i PATH=/usr/bin:/bin valgrind --tool=callgrind --collect-atstart=no \
    --callgrind-out-file="$out/cg.out" ./icount >"$work/stdout" 2>"$work/valgrind.log") || {
    cat "$work/stdout" "$work/valgrind.log" >&2
    echo "icount.sh: the cases failed under valgrind" >&2
    exit 1
}
echo "callgrind run: $((SECONDS - start))s"

cpu=$(sed -n 's/^cpu: //p' "$work/stdout")
clock=$(sed -n 's/^clocksource: //p' "$work/stdout")
n=$(sed -n 's/^n: //p' "$work/stdout")
[[ -n $cpu && -n $n ]] || { echo "icount.sh: no cpu or n line from benches/icount.c" >&2; exit 1; }
rustc_v=$(rustc --version)
valgrind_v=$(valgrind --version)
echo "$rustc_v; $valgrind_v; the CPU valgrind shows: $cpu; clock source: $clock"

# One "case total" line per client-request dump, in dump order.
totals=$work/totals
for ((i = 1; ; i++)); do
    [[ -f $out/cg.out.$i ]] || break
    awk '/^desc: Trigger: Client Request: / {name = $5}
         /^totals: / {total = $2}
         END {if (name != "") print name, total}' "$out/cg.out.$i"
done >"$totals"
# Instructions per operation: the case's total less the empty loop's, / n.
counts=$work/counts
awk -v n="$n" '$1 == "loop" {loop = $2; next} {printf "%s %.1f\n", $1, ($2 - loop) / n}' \
    "$totals" >"$counts"
[[ -s $counts ]] || { echo "icount.sh: no counts (callgrind files in $out)" >&2; exit 1; }

if [[ ${ICOUNT_UPDATE:-} == 1 ]]; then
    {
        echo "# Instructions per operation of benches/icount.c's cases under callgrind"
        echo "# (.ci/icount.sh; update: ICOUNT_UPDATE=1 .ci/icount.sh, with the reason"
        echo "# in the commit). Counted with:"
        echo "# rustc: $rustc_v"
        echo "# valgrind: $valgrind_v"
        echo "# cpu: $cpu"
        echo "# clocksource: $clock"
        cat "$counts"
    } >"$baseline"
    echo "wrote $baseline:"
    awk '{printf "%-36s %12s\n", $1, $2}' "$counts"
    exit 0
fi

[[ -f $baseline ]] || { echo "icount.sh: no $baseline (ICOUNT_UPDATE=1 writes it)" >&2; exit 1; }

notes=()
base_of() { sed -n "s/^# $1: //p" "$baseline"; }
[[ $(base_of rustc) == "$rustc_v" ]] || notes+=("rustc differs: baseline '$(base_of rustc)', now '$rustc_v'")
[[ $(base_of valgrind) == "$valgrind_v" ]] || notes+=("valgrind differs: baseline '$(base_of valgrind)', now '$valgrind_v'")
[[ $(base_of cpu) == "$cpu" ]] || notes+=("valgrind's CPU differs: baseline '$(base_of cpu)', now '$cpu'")
# Memory history stamps events with rdtsc only where the clock source is
# tsc (clock_gettime elsewhere): on another clock source the *_history
# cases are printed but not gated.
ungated=
if [[ $(base_of clocksource) != "$clock" ]]; then
    ungated=_history
    notes+=("clock source differs: baseline '$(base_of clocksource)', now '$clock': the *_history cases are not gated")
fi

# The table, and one FAIL line per case over the limit, missing from the
# baseline, or in the baseline but not run.
status=0
awk -v limit="$limit" -v ungated="$ungated" '
    FNR == NR { if ($0 !~ /^#/ && NF == 2) { base[$1] = $2; order[++nb] = $1 } next }
    { now[$1] = $2; seen[++nn] = $1 }
    END {
        printf "%-36s %12s %12s %8s\n", "case (instructions per operation)", "baseline", "now", "change"
        for (i = 1; i <= nn; i++) {
            c = seen[i]
            if (!(c in base)) {
                printf "%-36s %12s %12.1f %8s\n", c, "-", now[c], "new"
                fails = fails sprintf("FAIL: %s: no baseline (now %.1f): add it with ICOUNT_UPDATE=1\n", c, now[c])
                continue
            }
            g = base[c] > 0 ? (now[c] - base[c]) * 100 / base[c] : (now[c] > 0 ? 100 : 0)
            skip = ungated != "" && index(c, ungated) > 0
            printf "%-36s %12.1f %12.1f %+7.1f%%%s\n", c, base[c], now[c], g, skip ? " (not gated)" : ""
            if (g > limit && !skip)
                fails = fails sprintf("FAIL: %s: baseline %.1f, now %.1f instructions per operation: %+.1f%% (limit +%s%%)\n", c, base[c], now[c], g, limit)
        }
        for (i = 1; i <= nb; i++)
            if (!(order[i] in now))
                fails = fails sprintf("FAIL: %s: in the baseline but not counted\n", order[i])
        printf "%s", fails
        exit fails != ""
    }' "$baseline" "$counts" || status=$?
for note in "${notes[@]+"${notes[@]}"}"; do
    echo "note: $note (counts are comparable only with the same toolchain and CPU)"
done
if [[ $status -ne 0 ]]; then
    echo "icount.sh: instruction counts over the baseline (benches/icount_baseline.txt)." >&2
    echo "A change meant to cost more updates it (ICOUNT_UPDATE=1 .ci/icount.sh) and says why in the commit." >&2
    exit 1
fi
echo "instruction counts: every case within +${limit}% of the baseline"
