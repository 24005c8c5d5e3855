# Pipelines: PIPESTATUS, pipefail, `!`, SIGPIPE ending a writer (`yes | head`), long
# pipelines, `|&`, lastpipe, and a megabyte through a pipe.
source "${BASH_SOURCE[0]%/*}/lib.sh"

true | false | (exit 3)
check pipestatus "0 1 3" "${PIPESTATUS[*]}"

(exit 4)
check pipestatus-one-command "4" "${PIPESTATUS[*]}"

false | true
check last-status-without-pipefail 0 "$?"

set -o pipefail
false | true
check pipefail-fails 1 "$?"
(exit 2) | (exit 3) | true
check pipefail-rightmost-failure 3 "$?"
set +o pipefail

! false | false
check negated-pipeline 0 "$?"

# head exits after three lines; yes dies of SIGPIPE on its next write: 128 + 13.
yes | head -n 3 >output
statuses="${PIPESTATUS[*]}"
check yes-head-output $'y\ny\ny' "$(<output)"
check yes-head-sigpipe "141 0" "$statuses"

# The same with a bash subshell writing: the builtin echo's write raises SIGPIPE too.
for ((i = 0; i < 20000; i++)); do echo $i; done | head -n 1 >output
statuses="${PIPESTATUS[*]}"
check loop-writer-output 0 "$(<output)"
check loop-writer-sigpipe "141 0" "$statuses"

out=$(seq 1 1000 | cat | cat | cat | cat | cat | cat | cat | cat | cat | wc -l)
check ten-stage-pipeline 1000 "$out"

out=$(seq 1 100 | tr -d 0 | sort -n | tail -n 1 | tr 9 x | cat)
check mixed-pipeline xx "$out"

out=$(head -c 1000000 /dev/zero | cat | wc -c)
check megabyte-through-pipes 1000000 "$out"

out=$(echo a b | { read -r x y; echo "$y"; })
check group-reads-pipe b "$out"

f() { while read -r line; do echo "<$line>"; done; }
out=$(printf 'a\nb\n' | f)
check function-in-pipeline $'<a>\n<b>' "$out"

out=$({ echo out; echo err >&2; } |& sort)
check pipe-stderr-too $'err\nout' "$out"

x=unset
echo piped | read -r x
check pipe-read-in-subshell unset "$x"
shopt -s lastpipe
echo piped | read -r x
check lastpipe-reads-here piped "$x"
shopt -u lastpipe

count=0
printf '1\n2\n3\n' | while read -r n; do count=$((count + n)); done
check while-loop-in-subshell 0 "$count"

out=$(printf '%s\n' c a b | sort | head -n 2 | sort -r)
check sort-head-sort $'b\na' "$out"

# A reader that leaves early: the writer's exit status shows the signal, the reader's its own.
seq 1 100000 | { read -r first; echo "$first"; } >output
statuses="${PIPESTATUS[*]}"
check early-reader "1" "$(<output)"
check early-reader-writer-status "141 0" "$statuses"
