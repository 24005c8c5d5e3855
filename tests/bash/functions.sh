# Functions and locals: return statuses, dynamic scoping, recursion, arguments, FUNCNAME,
# namerefs, associative arrays, functions exported to a child bash.
source "${BASH_SOURCE[0]%/*}/lib.sh"

f() { return 3; }
f
check return-status 3 "$?"

g() { false; return; }
g
check bare-return-keeps-status 1 "$?"

x=global
h() { local x=local; inner; }
inner() { echo "$x"; }
check dynamic-scoping local "$(h)"
h >/dev/null
check local-restored global "$x"

set_global() { y=from-function; }
set_global
check assignment-is-global from-function "$y"

fact() { (( $1 <= 1 )) && { echo 1; return; }; echo $(($1 * $(fact $(($1 - 1))))); }
check recursion-with-substitution 3628800 "$(fact 10)"

depth() { local n=$1; (( n == 0 )) && { echo bottom; return; }; depth $((n - 1)); }
check deep-recursion bottom "$(depth 200)"

fib() {
    local -n result=$1
    local a=0 b=1 i
    for ((i = 0; i < $2; i++)); do ((b = a + b, a = b - a)); done
    result=$a
}
fib answer 30
check nameref-result 832040 "$answer"

count_args() { echo $#; }
check quoted-args-preserved 3 "$(count_args "a b" "" c)"
check unquoted-args-split 3 "$(count_args $(echo a b c))"

show() { local IFS=,; echo "$*"; }
check star-joins-with-ifs "a,b,c" "$(show a b c)"

outer() { inner_name; }
inner_name() { echo "${FUNCNAME[*]}"; }
check funcname-stack "inner_name outer main" "$(outer)"

shift_args() { shift 2; echo "$1"; }
check shift-in-function third "$(shift_args first second third)"

declare -A colour=([apple]=red [sky]=blue)
colour[grass]=green
check associative-array "3 blue" "${#colour[@]} ${colour[sky]}"

piped() { z=changed; }
z=original
echo | piped
check function-in-pipeline-subshell original "$z"

temporary() { echo "$TEMP_VAR"; }
check temporary-environment tmp "$(TEMP_VAR=tmp temporary)"

unset -f temporary
type temporary >/dev/null 2>&1
check unset-function 1 "$?"

exported() { echo "exported $1"; }
export -f exported
check export-function-to-child "exported ok" "$(bash -c 'exported ok')"

counter() { local -i c=0; c+=1; c+=1; echo $c; }
check local-integer 2 "$(counter)"

recurse_locals() {
    local level=$1
    (( level < 3 )) && recurse_locals $((level + 1))
    echo -n "$level"
}
check locals-per-frame 3210 "$(recurse_locals 0)"

function keyword_form { echo keyword; }
check function-keyword keyword "$(keyword_form)"

declare -f f >/dev/null
check declare-f-finds 0 "$?"

status_of_last() { true; false; }
status_of_last
check last-command-status 1 "$?"
