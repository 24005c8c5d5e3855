# Traps: EXIT, TERM, INT, USR1/USR2, ERR, traps in subshells and children, `trap -`,
# `trap -p`, ignored signals, and a trap interrupting `wait`.
source "${BASH_SOURCE[0]%/*}/lib.sh"

out=$(bash -c 'trap "echo bye" EXIT; echo hi')
check exit-trap-runs-last $'hi\nbye' "$out"

out=$(bash -c 'trap "echo status \$?" EXIT; exit 3')
check exit-trap-sees-status "status 3 3" "$out $?"

out=$(bash -c 'trap "echo got TERM; exit 9" TERM; kill -s TERM $$; echo not reached')
check term-trap "got TERM 9" "$out $?"

out=$(bash -c 'trap "echo got INT" INT; kill -s INT $$; echo after')
check int-trap-continues $'got INT\nafter' "$out"

out=$(bash -c 'trap "echo err \$LINENO" ERR; false; echo after')
check err-trap $'err 1\nafter' "$out"

out=$(bash -c 'trap "echo err" ERR; if false; then :; fi; false || true; ! true; echo quiet')
check err-trap-not-in-conditions "quiet" "$out"

out=$(bash -c 'trap "echo err in \${FUNCNAME[0]:-main}" ERR; f() { false; }; set -E; f')
check err-trap-functions-with-E "err in f"$'\n'"err in main" "$out"

# A caught signal goes back to its default in a subshell: TERM kills it.
out=$(bash -c 'trap "echo parent" TERM; (kill -s TERM $BASHPID; echo survived); echo status $?')
check trap-reset-in-subshell "status 143" "$out"

# An ignored signal stays ignored in subshells and across exec.
out=$(bash -c 'trap "" TERM; (kill -s TERM $BASHPID; echo subshell alive); sh -c "kill -s TERM \$\$; echo child alive"')
check ignored-stays-ignored $'subshell alive\nchild alive' "$out"

# A handled signal is back to its default in a program the shell starts.
out=$(bash -c 'trap "echo parent" TERM; sh -c "kill -s TERM \$\$; echo no"; echo status $?')
check handler-not-inherited "status 143" "$out"

out=$(bash -c 'trap "echo caught" TERM; trap - TERM; kill -s TERM $$; echo no')
check trap-dash-restores-default "143 " "$? $out"

trap 'echo hi' USR1
check trap-p-prints "trap -- 'echo hi' SIGUSR1" "$(trap -p USR1)"
trap - USR1
check trap-p-after-reset "" "$(trap -p USR1)"

trap '' INT
check trap-p-ignored "trap -- '' SIGINT" "$(trap -p INT)"
trap - INT

out=$( (trap 'echo sub-exit' EXIT; echo in) )
check exit-trap-in-subshell $'in\nsub-exit' "$out"

# Killed by a signal it does not trap, bash still runs its EXIT trap.
out=$(bash -c 'trap "echo exiting" EXIT; kill -s TERM $$; echo no')
check exit-trap-on-fatal-signal "exiting 143" "$out $?"

got=0
trap 'got=1' USR1
sh -c "kill -s USR1 $$"
check usr1-from-child 1 "$got"
trap - USR1

count=0
trap 'count=$((count + 1))' USR1 USR2
kill -s USR1 $$
kill -s USR2 $$
check one-trap-two-signals 2 "$count"
trap - USR1 USR2

# A trapped signal ends `wait` early with 128 + its number, and the trap runs.
trap 'echo usr1 >>trap-log' USR1
sleep 10 &
sleeper=$!
(sleep 0.2; kill -s USR1 $$) &
wait $sleeper
status=$?
check wait-interrupted-by-trap "138 usr1" "$status $(<trap-log)"
trap - USR1
kill $sleeper
wait

out=$(bash -c 'trap "exit 4" USR1; (sleep 0.2; kill -s USR1 $$) & sleep 3 & wait $!; echo no')
check exit-from-trap-in-wait "4 " "$? $out"

out=$(bash -c 'f() { trap "echo ret" RETURN; :; }; f; echo done')
check return-trap $'ret\ndone' "$out"

out=$(bash -c 'n=0; trap "n=\$((n + 1))" DEBUG; a=1; b=2; c=3; trap - DEBUG; echo $n')
check debug-trap-counts 4 "$out"
