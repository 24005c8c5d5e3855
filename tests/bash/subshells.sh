# Subshells and command substitution: isolation of variables and the directory, exit
# statuses, $BASHPID against $$, nesting, newline stripping, large outputs.
source "${BASH_SOURCE[0]%/*}/lib.sh"

x=1
(x=2)
check variable-stays-in-subshell 1 "$x"

(cd /)
check cd-stays-in-subshell "$PWD" "$(pwd)"

(exit 3)
check subshell-exit-status 3 "$?"

x=$(exit 5)
check substitution-status 5 "$?"

check substitution-output hi "$(echo hi)"
check backticks hi "`echo hi`"
check nested-substitution deep "$(echo $(echo $(echo deep)))"
check trailing-newlines-stripped a "$(printf 'a\n\n\n')"
check inner-newlines-kept $'a\n\nb' "$(printf 'a\n\nb\n')"
check quoted-keeps-spaces "a   b" "$(echo 'a   b')"
check unquoted-splits "a b" "$(echo $(echo 'a   b'))"

echo content >file
check read-file-substitution content "$(<file)"

# $$ is the main shell's pid in every subshell; $BASHPID is the subshell's own.
check dollar-dollar-in-substitution "$$" "$(echo $$)"
inner=$(echo $BASHPID)
[[ $inner != "$$" && $inner -gt 0 ]] && same=different || same=same
check bashpid-differs different "$same"

check ppid-of-child "$$" "$(bash -c 'echo $PPID')"

{ y=group; }
check group-runs-here group "$y"

big=$(head -c 200000 /dev/zero | tr '\0' a)
check large-substitution 200000 "${#big}"

out=$(for i in 1 2 3; do (echo "s$i") & done; wait)
[[ $out == *s1* && $out == *s2* && $out == *s3* ]] && all=all || all=missing
check background-outputs-all all "$all"

# Each subshell is a fork: 50 of them, each with a status, in sequence.
sum=0
for i in $(seq 1 50); do
    (exit $((i % 7)))
    sum=$((sum + $?))
done
check fifty-subshells 148 "$sum"

out=$(set -e; false; echo not-reached)
check errexit-in-substitution "" "$out"

out=$( (echo a; exit 2); echo "status $?")
check subshell-in-substitution $'a\nstatus 2' "$out"

f() { echo "from f $1"; }
check function-in-substitution "from f z" "$(f z)"

arr=($(printf '%s\n' one two three))
check substitution-to-array "3 two" "${#arr[@]} ${arr[1]}"

exec 3>fd-file
(echo via-subshell >&3)
exec 3>&-
check subshell-inherits-fd via-subshell "$(<fd-file)"
