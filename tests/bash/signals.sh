# Signals: `kill -s` to the shell itself with a trap, `kill -0`, a child's death by signal as
# 128 + N (PIPE, TERM, KILL, SEGV, ...), `kill -l`, a signal to a process group, a signal to
# a bash child that traps it.
source "${BASH_SOURCE[0]%/*}/lib.sh"

trap 'echo caught >term-log' TERM
kill -s TERM $$
check kill-self-with-trap caught "$(<term-log)"
trap - TERM

kill -0 $$
check kill-zero-self 0 "$?"

sh -c 'exit 0'
sleep 0.1 &
gone=$!
wait $gone
kill -0 $gone 2>/dev/null
check kill-zero-gone 1 "$?"

# A shell that sends itself a signal it does not handle dies of it: its parent sees 128 + N.
# (Not QUIT: busybox sh ignores it, as bash does.)
for pair in PIPE:141 TERM:143 KILL:137 HUP:129 INT:130 USR1:138 USR2:140 ALRM:142 ABRT:134 SEGV:139; do
    signal=${pair%:*}
    sh -c "kill -s $signal \$\$"
    check "child-killed-by-$signal" "${pair#*:}" "$?"
done

check kill-l-number TERM "$(kill -l 15)"
check kill-l-status PIPE "$(kill -l 141)"
check kill-l-name 10 "$(kill -l USR1)"

# A group: with job control the background job leads its own group, and `kill -- -pgid`
# reaches the job's children as well.
set -m
sh -c 'sleep 10 & sleep 10; echo no' &
leader=$!
sleep 0.3
kill -s TERM -- -$leader
wait $leader
check kill-process-group 143 "$?"
set +m

# A bash child that traps USR1 acknowledges it through a file, then exits by itself.
rm -f ready ack
bash -c 'trap "echo usr1 >ack; exit 0" USR1; echo ready >ready; for i in $(seq 1 50); do sleep 0.1; done; exit 3' &
child=$!
for _ in $(seq 1 30); do [[ -e ready ]] && break; sleep 0.1; done
kill -s USR1 $child
wait $child
status=$?
check signal-bash-child "0 usr1" "$status $(<ack)"

# A program started by the shell inherits an ignored SIGPIPE: a writer to a closed pipe then
# sees the error instead of dying.
trap '' PIPE
out=$(sh -c 'kill -s PIPE $$; echo still here')
check ignored-pipe-inherited "still here" "$out"
trap - PIPE

# `kill` with a job's pid that has already been reaped is an error.
(exit 0) &
pid=$!
wait $pid
kill $pid 2>/dev/null
check kill-reaped-pid 1 "$?"

kill -s NOSUCH $$ 2>/dev/null
check kill-bad-signal-name 1 "$?"

# SIGCHLD is delivered when a child ends: a trap counts them (bash runs it once per child).
set -m
count=0
trap 'count=$((count + 1))' CHLD
sh -c 'exit 0'
sh -c 'exit 0'
sh -c 'exit 0'
trap - CHLD
set +m
check chld-trap-counts 3 "$count"
