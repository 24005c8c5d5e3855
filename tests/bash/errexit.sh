# `set -e` semantics and `$?`: where errexit applies and where it does not, in subshells,
# substitutions and functions; `set -u`; statuses 126 and 127; `exit` modulo 256.
source "${BASH_SOURCE[0]%/*}/lib.sh"

out=$(bash -c 'set -e; false; echo no')
check stops-at-failure "1 " "$? $out"

out=$(bash -c 'set -e; if false; then :; fi; false || true; false && true; ! true; while false; do :; done; echo reached')
check ignored-in-conditions reached "$out"

out=$(bash -c 'set -e; true && false; echo reached')
check last-of-and-list "1 " "$? $out"

out=$(bash -c 'set -e; (false; echo inner); echo outer')
check subshell-inherits "1 " "$? $out"

out=$(bash -c 'set -e; x=$(false); echo no')
check assignment-substitution "1 " "$? $out"

out=$(bash -c 'set -e; f() { local x=$(false); echo local-masks; }; f')
check local-masks-status local-masks "$out"

out=$(bash -c 'set -e; f() { false; echo in-f; }; if f; then echo yes; fi')
check ignored-inside-condition-function $'in-f\nyes' "$out"

out=$(bash -c 'set -e; false | true; echo survived')
check pipeline-last-counts survived "$out"

out=$(bash -c 'set -eo pipefail; false | true; echo no')
check pipefail-stops "1 " "$? $out"

out=$(bash -c 'set -e; x=$(false; echo after); echo "[$x]"')
check substitution-without-inherit "[after]" "$out"

out=$(bash -c 'set -e; shopt -s inherit_errexit; x=$(false; echo after); echo "[$x]"')
check inherit-errexit "1 " "$? $out"

out=$(bash -c 'set -e; trap "echo exit-trap" EXIT; false')
check exit-trap-after-errexit "1 exit-trap" "$? $out"

! true
check bang-status 1 "$?"
! false
check bang-false-status 0 "$?"

{ true; false; }
check group-status 1 "$?"

nosuch-command-xyz 2>/dev/null
check not-found 127 "$?"

printf 'echo hi\n' >not-executable
./not-executable 2>/dev/null
check not-executable 126 "$?"

bash -c 'exit 300'
check exit-modulo-256 44 "$?"

out=$(bash -c 'set -u; echo $unset_variable; echo no' 2>/dev/null)
check nounset-stops "127 " "$? $out"

out=$(bash -c 'set -u; echo ${unset_variable:-default}')
check nounset-default default "$out"

false
true $?
check status-argument-then-true 0 "$?"

false
status=$?
check status-captured 1 "$status"

(exit 42)
x=$?
check status-after-subshell 42 "$x"

out=$(bash -c 'set -e; f() { false; }; f; echo no')
check function-failure-stops "1 " "$? $out"

out=$(bash -c 'set -e; false || { echo recovered; }; echo end')
check or-recovers $'recovered\nend' "$out"

out=$(bash -c 'set -e; set +e; false; echo plus-e')
check plus-e-turns-off plus-e "$out"
