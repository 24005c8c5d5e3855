# `wait`: one pid, all children, `wait -n` (with -p), statuses of children ended by
# signals (128 + N), remembered statuses, unknown pids, many children.
source "${BASH_SOURCE[0]%/*}/lib.sh"

(exit 7) &
wait $!
check wait-pid-status 7 "$?"

sleep 0.2 &
sleep 0.3 &
wait
check wait-all-status 0 "$?"

sleep 0.1 &
wait
check wait-all-reaps "" "$(jobs -p)"

sleep 10 &
slow=$!
(sleep 0.1; exit 4) &
wait -n
check wait-n-first-done 4 "$?"
kill $slow
wait $slow

sleep 10 &
slow=$!
(sleep 0.1; exit 6) &
fast=$!
wait -n -p finished
status=$?
check wait-n-p-names-pid "$fast 6" "$finished $status"
kill $slow
wait $slow

wait -n
check wait-n-no-children 127 "$?"

sleep 3 &
kill -s TERM $!
wait $!
check killed-by-term 143 "$?"

sleep 3 &
kill -s KILL $!
wait $!
check killed-by-kill 137 "$?"

sleep 3 &
kill -s USR1 $!
wait $!
check killed-by-usr1 138 "$?"

sleep 3 &
kill -s HUP $!
wait $!
check killed-by-hup 129 "$?"

# Without job control, an asynchronous command starts with SIGINT and SIGQUIT ignored. The
# child sets that up after the fork, before it runs sh: the file says sh has started.
rm -f started
sh -c ': >started; sleep 1' &
for _ in $(seq 1 30); do [[ -e started ]] && break; sleep 0.1; done
kill -s INT $!
wait $!
check async-ignores-int 0 "$?"

wait 99999
check wait-unknown-pid 127 "$?"

# bash remembers the status of a child reaped before the script asks for it.
(exit 9) &
pid=$!
sleep 0.3
wait $pid
check remembered-status 9 "$?"

wait
check wait-nothing 0 "$?"

pids=()
for i in $(seq 1 20); do
    (exit $i) &
    pids+=($!)
done
sum=0
for pid in "${pids[@]}"; do
    wait $pid
    sum=$((sum + $?))
done
check twenty-children 210 "$sum"

# wait does not wait for a grandchild: the child ends, its own child lives on.
start=${EPOCHREALTIME/./}
(sleep 2 &) &
wait $!
(( ${EPOCHREALTIME/./} - start < 1500000 )) && waited=briefly || waited=long
check no-wait-for-grandchild briefly "$waited"

sh -c 'exit 3' &
wait $!
check external-child-status 3 "$?"

# A builtin `wait` in a subshell does not see the parent's children.
sleep 0.5 &
sub=$( (wait; echo "status $?") )
check subshell-has-no-children "status 0" "$sub"
wait
