# Job control in a script: `set -m`, `jobs`, job specs (%1, %+, %-, %string), `$!`, `fg`,
# `disown`, process groups of background jobs, and stopping a job with SIGSTOP.
source "${BASH_SOURCE[0]%/*}/lib.sh"

set -m

# Sleepers that the script kills sleep long: under a loaded host they must still be there.
sleep 10 &
pid=$!
jobs -p >pids
check bang-is-job-pid "$pid" "$(<pids)"

jobs >listing
check_match jobs-lists-running '^\[1\]\+ +Running +sleep 10 &$' "$(<listing)"

# With job control on, a background job leads a process group of its own: the group named
# by its pid exists.
kill -0 -- -$pid 2>/dev/null
check job-own-process-group 0 "$?"

kill %1
wait $pid
check kill-percent-status 143 "$?"

# `wait %1` while the job runs: once it has ended and been reported, the job is gone.
(sleep 0.5; exit 7) &
wait %1
check wait-percent-status 7 "$?"

sleep 10 &
first=$!
sleep 10 &
second=$!
jobs -p %+ >current
jobs -p %- >previous
check current-and-previous "$second $first" "$(<current) $(<previous)"
jobs -p %1 >one
check percent-number "$first" "$(<one)"
jobs -r >running
check jobs-r-counts 2 "$(wc -l <running)"
kill %2 %1
wait
jobs >left
check wait-empties-table "" "$(<left)"

sleep 10 &
pid=$!
kill %sleep
wait $pid
check percent-prefix 143 "$?"

sleep 10 &
pid=$!
kill %?lee
wait $pid
check percent-substring 143 "$?"

sleep 10 &
pid=$!
disown
jobs >left
check disown-forgets "" "$(<left)"
kill $pid

(sleep 0.5; exit 5) &
fg %1 >/dev/null
check fg-status 5 "$?"

# SIGSTOP then SIGCONT: the shell sees the job stopped (waitpid WUNTRACED), then resumes it.
sleep 10 &
pid=$!
kill -s STOP $pid
for _ in 1 2 3 4 5 6 7 8 9 10; do
    jobs >state
    [[ $(<state) == *Stopped* ]] && break
    sleep 0.1
done
check_match stop-shows-stopped 'Stopped' "$(<state)"
kill -s CONT $pid
for _ in 1 2 3 4 5 6 7 8 9 10; do
    jobs >state
    [[ $(<state) == *Running* ]] && break
    sleep 0.1
done
check_match cont-shows-running 'Running' "$(<state)"
kill $pid
wait $pid
check killed-after-cont 143 "$?"

# Without job control, background jobs share the shell's process group: no group is named
# by the job's pid, and /proc/<pid>/stat shows the shell's group (field 5) and session (6).
set +m
sleep 10 &
pid=$!
kill -0 -- -$pid 2>/dev/null
check no-monitor-no-own-group 1 "$?"
read -r -a stat </proc/$pid/stat
read -r -a own </proc/$$/stat
check proc-stat-group-and-session "${own[4]} ${own[5]}" "${stat[4]} ${stat[5]}"
kill $pid
wait $pid
check no-monitor-kill-status 143 "$?"
