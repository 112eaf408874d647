#!/usr/bin/env bash
# Builds and runs the SMI example programs that ship with MP-MPICH (mpid/ch_smi/SMI/examples of
# github RWTH-OS/MP-MPICH) on svm's SMI personality, and prints a table
# example x nodes x fault backend -> pass/FAIL (docs/smi.md, "The MP-MPICH examples").
#
#   tests/smi/run-mpich-examples.sh SMI_DIR
#
# SMI_DIR is your local mpid/ch_smi/SMI folder. The examples are licensed against
# redistribution: they are compiled from SMI_DIR into a temporary directory (never into this
# repository), with the documented command
#   cc $(svm-config --cflags) x.c $(svm-config --libs smi) -o x -lm
# Needs `cargo build --release --workspace --lib --bins --examples` first (svmrun, svm-config,
# libsvm_smi.so in target/release; set SVM_BIN to use another directory).
#
# Environment: SVM_BIN (directory of svmrun and svm-config), WORK (build/log directory, default a
# fresh mktemp -d), ONLY (space-separated example names to run), FAULTS (default "uffd segv"),
# RUN_TIMEOUT (seconds per run, default 300), SVMRUN_ARGS (extra svmrun options, e.g.
# "--protocol sc-mw").
set -u

if [ $# -ne 1 ] || [ ! -d "$1/examples" ]; then
    echo "usage: $0 SMI_DIR   (SMI_DIR = your mpid/ch_smi/SMI folder, with examples/ inside)" >&2
    exit 2
fi
SMI_DIR=$(cd "$1" && pwd)
EX="$SMI_DIR/examples"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SVM_BIN=${SVM_BIN:-$ROOT/target/release}
for t in svmrun svm-config; do
    if [ ! -x "$SVM_BIN/$t" ]; then
        echo "$0: $SVM_BIN/$t not found: run 'cargo build --release --workspace --lib --bins --examples' (or set SVM_BIN)" >&2
        exit 2
    fi
done
export PATH="$SVM_BIN:$PATH"
WORK=${WORK:-$(mktemp -d /tmp/smi-examples.XXXXXX)}
case "$WORK" in "$ROOT"/*)
    echo "$0: WORK ($WORK) is inside the repository; the examples must not be built there" >&2
    exit 2 ;;
esac
mkdir -p "$WORK/bin" "$WORK/logs"
FAULTS=${FAULTS:-uffd segv}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
SVMRUN_ARGS=${SVMRUN_ARGS:-}

# name | source (relative to examples/) | node counts | arguments
# Node counts are those the program supports (it says so itself: the others print "must use 2
# processes" or wait for a partner that does not exist). Arguments shrink only the repetition
# counts of the two pure benchmarks so one run takes seconds.
EXAMPLES='
helloworld|test/helloworld.c|1 2 3 4|
mutex|test/mutex.c|1 2 3 4|
sync|test/sync.c|1 2 3 4|
replicate|test/replicate.c|1 2 3 4|
regions|test/regions.c|1 2 3 4|
fragmented|test/fragmented.c|1 2 3 4|
fragmented-a|test/fragmented.c|1 2 3 4|-a -m 64
alltoall|test/alltoall.c|1 2 3 4|
sort_undivided|sort/sort_undivided.c|1 2 3 4|
mergesort|sort/mergesort.c|1 2 3 4|
sort_memcpy|sort/sort_memcpy.c|1 2 3 4|
sort_rmtread|sort/sort_rmtread.c|1 2 3 4|
poisson|poisson/poisson.c|1 2 3 4|
signal|test/signal.c|2|
signal_many|test/signal_many.c|2 3 4|
dma|test/dma.c|2|
region_cb|test/region_cb.c|2|
put|test/put.c|2|
memperf|test/memperf.c|2|
memcpy|test/memcpy.c|2|1 262144 100
strided|test/strided.c|2 3 4|
registering|test/registering.c|2|
reglimits|test/reglimits.c|1 2 3 4|
regalloc|test/regalloc.c|1 2 3 4|
memcpy_bench|memcpy_bench/memcpy_bench.c|2|
'

count() { grep -c -- "$1" "$2" 2>/dev/null || true; }

# judge NAME NODES LOG STATUS -> prints "pass" or "FAIL: reason"
judge() {
    local name=$1 n=$2 log=$3 st=$4 i k
    if grep -q 'killed by signal\|SIGPIPE\|Broken pipe\|panicked' "$log"; then
        echo "FAIL: a node died (see log)"; return
    fi
    case $name in
    helloworld)
        for ((i = 0; i < n; i++)); do
            grep -q "Hello World - this is process $i of $n," "$log" || { echo "FAIL: no greeting of $i"; return; }
        done ;;
    mutex) grep -q 'The mutex seems to work' "$log" || { echo "FAIL: entries missing"; return; } ;;
    sync) grep -q '>>> locks seem to work fine' "$log" || { echo "FAIL: lock errors"; return; } ;;
    replicate)
        # SINGLE_SOURCE with p1 = 1: every element becomes process 1's value, 1. The program
        # compares with (size/2)*(size-1), which is 1 only for 2 processes (0 for 1 process).
        if [ "$n" -le 2 ]; then
            grep -q 'failed' "$log" && { echo "FAIL: check failed"; return; }
        else
            grep -q "reduction method add failed! (i:0 1-$(( (n / 2) * (n - 1) )))" "$log" ||
                { echo "FAIL: unexpected result"; return; }
            echo "pass (elements = 1 = rank 1's copy; the program's own check expects $(( (n / 2) * (n - 1) )))"
            return
        fi ;;
    regions) grep -q '>>> non-fixed UNDIVIDED regions are o.k.' "$log" || { echo "FAIL: regions"; return; } ;;
    fragmented|fragmented-a)
        local want=1024
        [ "$name" = fragmented-a ] && want=64
        k=$(count "could create $want fragmented regions" "$log")
        [ "$k" -eq "$n" ] || { echo "FAIL: $k of $n processes created $want regions"; return; } ;;
    alltoall) grep -q 'stress test passed.' "$log" || { echo "FAIL: no 'passed'"; return; } ;;
    sort_undivided|mergesort|sort_memcpy|sort_rmtread)
        grep -q 'error in sort' "$log" && { echo "FAIL: not sorted"; return; }
        grep -q 'computing time for a sort' "$log" || { echo "FAIL: no result"; return; }
        k=$(count 'END OF PROCESS' "$log")
        [ "$name" = sort_undivided ] && [ "$k" -ne "$n" ] && { echo "FAIL: $k of $n processes ended"; return; } ;;
    poisson)
        # SVM_SMI_LOOP_STATS=1 makes SMI_Loop_free report the runs of the loop and the indices
        # each process was handed: 1 + 5000 runs over rows 0..255, every row once per run.
        k=$(count 'time for 100 iterations' "$log")
        [ "$k" -eq 50 ] || { echo "FAIL: $k of 50 progress lines"; return; }
        k=$(grep -c 'loop 0: runs=5001 ' "$log")
        [ "$k" -eq "$n" ] || { echo "FAIL: $k of $n processes ran the loop 5001 times"; return; }
        k=$(grep -o 'loop 0: runs=5001 indices=[0-9]*' "$log" | awk -F= '{s += $3} END {print s + 0}')
        [ "$k" -eq $((5001 * 256)) ] || { echo "FAIL: $k indices handed out, not $((5001 * 256))"; return; } ;;
    signal)
        grep -q '>>> signals are stored' "$log" || { echo "FAIL: signals"; return; }
        grep -q '>>> average signal latency' "$log" || { echo "FAIL: latency"; return; }
        for i in 0 1; do
            grep -q "\[$i\] callback of process $i triggered" "$log" || { echo "FAIL: callback $i"; return; }
        done ;;
    signal_many)
        k=$(count 'signal received.' "$log")
        [ "$k" -eq $((n * (n - 1))) ] || { echo "FAIL: $k of $((n * (n - 1))) signals"; return; } ;;
    dma) grep -q 'got message: "Dies ist der Text vom Sender"' "$log" || { echo "FAIL: message"; return; } ;;
    region_cb)
        grep -q 'Success: remote shared region was freed.' "$log" || { echo "FAIL: not freed"; return; }
        grep -q 'Callback for region .*, reason is 2.' "$log" || { echo "FAIL: no callback"; return; } ;;
    put)
        grep -q 'error at' "$log" && { echo "FAIL: wrong data"; return; }
        grep -q 'using SMI_Imemcpy() took' "$log" && grep -q 'using SMI_Put() took' "$log" ||
            { echo "FAIL: incomplete"; return; } ;;
    registering)
        grep -q 'error at' "$log" && { echo "FAIL: wrong data"; return; }
        k=$(count 'was successful' "$log")
        [ "$k" -eq 3 ] || { echo "FAIL: $k of 3 transfers"; return; } ;;
    memperf)
        k=$(count '^\[0\] >>> ' "$log")
        [ "$k" -eq 8 ] || { echo "FAIL: $k of 8 results"; return; } ;;
    memcpy)
        grep -q '# remote memory' "$log" || { echo "FAIL: no remote part"; return; }
        k=$(grep -c '^\[1\] *[0-9]' "$log")
        [ "$k" -eq 38 ] || { echo "FAIL: $k of 38 rows"; return; } ;;
    strided)
        k=$(grep -c '^\[[0-9]\] [0-9]' "$log")
        [ "$k" -eq $(( (n - 1) * 64 )) ] || { echo "FAIL: $k of $(( (n - 1) * 64 )) rows"; return; } ;;
    reglimits)
        k=$(count 'maximum nunber of segments on node .* is 1024' "$log")
        [ "$k" -eq "$n" ] || { echo "FAIL: $k of $n processes reached 1024 segments"; return; }
        k=$(count 'maximum common segment size' "$log")
        [ "$k" -eq "$n" ] || { echo "FAIL: common size"; return; } ;;
    regalloc) grep -q 'creation failed' "$log" && { echo "FAIL: creation failed"; return; } ;;
    esac
    [ "$st" -eq 0 ] || { echo "FAIL: exit status $st"; return; }
    echo pass
}

declare -a ROWS
fails=0
CFLAGS=$(svm-config --cflags) || exit 2
LIBS=$(svm-config --libs smi) || exit 2
while IFS='|' read -r name src nodes args; do
    [ -n "$name" ] || continue
    if [ -n "${ONLY:-}" ] && ! grep -qw -- "$name" <<<"$ONLY"; then continue; fi
    exe="$WORK/bin/${src##*/}"
    exe=${exe%.c}
    if [ ! -x "$exe" ]; then
        if ! cc -w $CFLAGS "$EX/$src" $LIBS -o "$exe" -lm >"$WORK/logs/$name.build" 2>&1; then
            if [ "$name" = memcpy_bench ]; then
                ROWS+=("$(printf '%-16s %-5s %-5s %s' "$name" - - "not built: uses SMI-internal symbols (see $WORK/logs/$name.build)")")
            else
                ROWS+=("$(printf '%-16s %-5s %-5s %s' "$name" - - "FAIL: does not compile ($WORK/logs/$name.build)")")
                fails=$((fails + 1))
            fi
            continue
        fi
    fi
    [ "$name" = memcpy_bench ] && {
        ROWS+=("$(printf '%-16s %-5s %-5s %s' "$name" - - "built; not run (needs SMI internals)")")
        continue
    }
    for n in $nodes; do
        for f in $FAULTS; do
            log="$WORK/logs/$name.n$n.$f.log"
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            (cd "$WORK" && SVM_SMI_LOOP_STATS=1 SVM_TIMEOUT=$RUN_TIMEOUT timeout -k 10 $((RUN_TIMEOUT + 30)) \
                svmrun -n "$n" --fault "$f" --timeout "$RUN_TIMEOUT" $SVMRUN_ARGS "$exe" $args) >"$log" 2>&1 </dev/null
            st=$?
            secs=$(echo "$(date +%s.%N) - $t0" | bc)
            verdict=$(judge "$name" "$n" "$log" "$st")
            case $verdict in pass*) ;; *) fails=$((fails + 1)) ;; esac
            ROWS+=("$(printf '%-16s %-5s %-5s %-8s %s' "$name" "$n" "$f" "$(printf '%.1fs' "$secs")" "$verdict")")
            printf '%-16s n=%s %-4s %6.1fs %s\n' "$name" "$n" "$f" "$secs" "$verdict" >&2
        done
    done
done <<<"$EXAMPLES"

echo
echo "MP-MPICH SMI examples on svm ($SMI_DIR; logs in $WORK/logs)"
printf '%-16s %-5s %-5s %-8s %s\n' example nodes fault time result
for r in "${ROWS[@]}"; do echo "$r"; done
echo "failures: $fails"
[ "$fails" -eq 0 ]
