#!/usr/bin/env bash
# The `tessera convert` rows of docs/PERFORMANCE.md: a 1 GiB safetensors
# file (8 float32 tensors of 128 MiB, random bytes) converted to torch and
# back, each direction against `cp` of the same file in the same round
# (coreutils' cp: copy_file_range, the bytes copied inside the kernel) and
# against `dd bs=128M` (read() into a buffer and write() from it: what a
# writer from memory, as tessera's save, can at best do).
#
#   benches/convert.sh                 # 5 rounds; builds target/release/tessera
#   TESSERA=path/to/tessera benches/convert.sh
#   ROUNDS=9 BENCH_DIR=/some/disk benches/convert.sh
#
# Every round, in this order: cp IN (safetensors) to a new file, dd IN to
# a new file, tessera convert IN -> OUT.pt, then the same three from
# OUT.pt (tessera convert OUT.pt -> BACK.safetensors); each output is
# removed before it is written again. Each timed command starts after an
# untimed `sync`, so none pays for writing back what the one before it
# left dirty (without it the third command of a round, tessera's, ran with
# cp's and dd's 2 GiB being written back); none syncs inside its time
# (cp and dd do not: all leave the writing-back to the kernel). The files
# live in BENCH_DIR (default: /tmp); the page
# cache is warm (a first round is not counted). Then one more conversion
# each way under /usr/bin/time -v (its "Maximum resident set size", which
# counts the mapped input's pages too) while the anonymous memory
# (RssAnon in /proc/PID/status) is sampled every millisecond: the
# conversion's own memory, which must stay within 64 MiB plus the largest
# tensor (128 MiB here). Prints a markdown row per direction (median time,
# GB/s of the file, ratios to cp and dd as the ratios of the medians
# [lowest-highest round], the peaks) and the verdicts; `tessera diff` checks the round trip
# is equal. The files are removed at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${ROUNDS:-5}
dir=$(mktemp -d "${BENCH_DIR:-/tmp}/tessera-convert-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
tessera=${TESSERA:-}
if [[ -z $tessera ]]; then
    (cd "$root" && cargo build --release --bin tessera --quiet)
    tessera=$root/target/release/tessera
fi

in=$dir/in.safetensors
python3 - "$in" <<'PY'
import json, os, sys
n, each = 8, 128 << 20
header = {"w%d" % i: {"dtype": "F32", "shape": [each // 4 // 4096, 4096],
                      "data_offsets": [i * each, (i + 1) * each]} for i in range(n)}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(len(h).to_bytes(8, "little") + h)
    for _ in range(n):
        f.write(os.urandom(each))
PY
bytes=$(stat -c %s "$in")

now() { date +%s%N; }
# timed CMD...: syncs, then runs it and prints its wall time in ns.
timed() {
    local t0
    sync
    t0=$(now)
    "$@" >/dev/null
    echo $(($(now) - t0))
}

declare -a cp1 dd1 to_pt cp2 dd2 to_st
for ((r = 0; r <= rounds; r++)); do
    rm -f "$dir"/{cp1,dd1,out.pt,cp2,dd2,back.safetensors}
    a=$(timed cp "$in" "$dir/cp1")
    b=$(timed dd if="$in" of="$dir/dd1" bs=128M status=none)
    c=$(timed "$tessera" convert --quiet "$in" "$dir/out.pt")
    rm -f "$dir/cp1" "$dir/dd1"
    d=$(timed cp "$dir/out.pt" "$dir/cp2")
    e=$(timed dd if="$dir/out.pt" of="$dir/dd2" bs=128M status=none)
    f=$(timed "$tessera" convert --quiet "$dir/out.pt" "$dir/back.safetensors")
    ((r == 0)) && continue # warm-up
    cp1+=("$a") dd1+=("$b") to_pt+=("$c") cp2+=("$d") dd2+=("$e") to_st+=("$f")
done
"$tessera" diff --quiet "$in" "$dir/back.safetensors" ||
    { echo "FAIL: the round trip is not equal" >&2; exit 1; }

# peaks SRC DST: "max RSS KiB, peak RssAnon KiB" of one conversion.
peaks() {
    rm -f "$2"
    /usr/bin/time -v -o "$dir/time.txt" "$tessera" convert --quiet "$1" "$2" &
    local tpid=$! peak=0 pid="" anon
    # The conversion is /usr/bin/time's child.
    while kill -0 "$tpid" 2>/dev/null; do
        [[ -z $pid ]] && pid=$(pgrep -P "$tpid" || true)
        if [[ -n $pid ]]; then
            anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            ((${anon:-0} > peak)) && peak=$anon
        fi
        sleep 0.001
    done
    wait "$tpid"
    echo "$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt") $peak"
}
read -r pt_rss pt_anon < <(peaks "$in" "$dir/out.pt")
read -r st_rss st_anon < <(peaks "$dir/out.pt" "$dir/back.safetensors")

python3 - "$bytes" "${cp1[*]}" "${dd1[*]}" "${to_pt[*]}" "${cp2[*]}" "${dd2[*]}" "${to_st[*]}" \
    "$pt_rss" "$pt_anon" "$st_rss" "$st_anon" <<'PY'
import statistics as st, sys
size = int(sys.argv[1])
cp1, dd1, to_pt, cp2, dd2, to_st = ([int(x) for x in a.split()] for a in sys.argv[2:8])
pt_rss, pt_anon, st_rss, st_anon = (int(x) for x in sys.argv[8:12])
limit_kib = (64 + 128) << 10  # 64 MiB + the largest tensor
ok = True
print("| case | tessera (median) | time ratio tessera / anchor: median [lowest-highest round] (anchor's median) | peak memory: max RSS / anonymous | target | result |")
print("|---|---|---|---|---|---|")
def ratio(t, c, name):
    r = [a / b for a, b in zip(t, c)]
    return "%.2fx [%.2f-%.2f] %s (%.0f ms)" % (
        st.median(t) / st.median(c), min(r), max(r), name, st.median(c) / 1e6)
for name, t, c, d, rss, anon in (("safetensors -> torch", to_pt, cp1, dd1, pt_rss, pt_anon),
                                 ("torch -> safetensors", to_st, cp2, dd2, st_rss, st_anon)):
    mt, mc = st.median(t), st.median(c)
    passed = mt / mc <= 1.2 and anon <= limit_kib
    ok &= passed
    print("| convert 1 GiB %s | %.0f ms (%.1f GB/s) | %s; %s | %d MiB / %.1f MiB | <= 1.2x cp (medians), anonymous <= 64 MiB + largest tensor (192 MiB) | %s |" % (
        name, mt / 1e6, size / mt, ratio(t, c, "cp"), ratio(t, d, "dd"),
        rss >> 10, anon / 1024, "PASS" if passed else "FAIL"))
rt = [a + b for a, b in zip(to_pt, to_st)]
rc = [a + b for a, b in zip(cp1, cp2)]
print("\nround trip (both conversions) %.0f ms against two cp %.0f ms: %.2fx; %d rounds" % (
    st.median(rt) / 1e6, st.median(rc) / 1e6, st.median(rt) / st.median(rc), len(rt)))
sys.exit(0 if ok else 1)
PY
