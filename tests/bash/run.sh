# Runs every case script of the bash suite, each with its own scratch directory and a time
# bound, and ends with `BASH-SUITE-DONE`. Usage: bash run.sh [--on CORE SCRIPT...]
# With --on, the named scripts run through Reef's `on CORE bash SCRIPT` (another core).

# Case scripts are the *.sh here other than this runner and the helpers.
# An absolute path: each script starts in its own directory.
here=.
[[ ${BASH_SOURCE[0]} == */* ]] && here=${BASH_SOURCE[0]%/*}
here=$(cd "$here" && pwd)
scratch_root=${TMPDIR:-/tmp}/bash-suite
# A script still running after this many seconds is killed: its remaining cases are missing.
# The slowest takes about 6 s on Reef under TCG; the limit stays below the 60 s of silence
# after which cargo xtask test's watchdog would end the whole run (a hung case is silent).
limit=25

declare -A on_core=()
if [[ $1 == --on ]]; then
    core=$2
    shift 2
    for name in "$@"; do on_core[$name]=$core; done
fi

for script in "$here"/*.sh; do
    name=${script##*/}
    name=${name%.sh}
    [[ $name == run || $name == lib ]] && continue
    directory=$scratch_root/$name
    rm -rf "$directory"
    mkdir -p "$directory"
    if [[ -n ${on_core[$name]} ]]; then
        launcher=(on "${on_core[$name]}" bash)
    else
        launcher=(bash)
    fi
    echo "SCRIPT $name start${on_core[$name]:+ on core ${on_core[$name]}}"
    (cd "$directory" && BASH_SUITE_SCRATCH=$directory exec "${launcher[@]}" "$script" </dev/null) &
    pid=$!
    # The watchdog ends its sleep when it is told to stop, so no sleep outlives the suite.
    (
        trap 'kill $sleeper 2>/dev/null; exit 0' TERM
        sleep "$limit" &
        sleeper=$!
        wait $sleeper
        echo "SCRIPT $name killed after $limit s"
        kill -KILL $pid
    ) &
    watchdog=$!
    wait $pid
    status=$?
    kill -TERM $watchdog 2>/dev/null
    wait $watchdog
    echo "SCRIPT $name end status $status"
done
echo BASH-SUITE-DONE
