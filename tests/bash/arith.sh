# Arithmetic: precedence, signed division and modulo, 64-bit wrap, bases, `(( ))` status,
# `let`, `declare -i`, assignment operators, arrays, division by zero.
source "${BASH_SOURCE[0]%/*}/lib.sh"

check precedence 14 "$((2 + 3 * 4))"
check parentheses 20 "$(((2 + 3) * 4))"
check division-truncates "-3 -1" "$((-7 / 2)) $((-7 % 2))"
check power 1024 "$((2 ** 10))"
check bit-operations "6 7 1 -6" "$((6 & 7)) $((6 | 3)) $((6 ^ 7)) $((~5))"
check shifts "4611686018427387904 1" "$((1 << 62)) $((4 >> 2))"
check wraps-64-bit -9223372036854775808 "$((9223372036854775807 + 1))"
check bases "255 10 31 8 35" "$((16#ff)) $((2#1010)) $((0x1F)) $((010)) $((36#z))"
check ternary-and-comma "1 3" "$((1 > 0 ? 1 : 0)) $((a = 1, a + 2))"
check_match ternary-value 'yes' "$( (( 5 > 3 )) && echo yes)"

i=5
check post-increment "5 6" "$((i++)) $i"
check pre-decrement "5 5" "$((--i)) $i"

(( 0 ))
s0=$?
(( 5 ))
s5=$?
check double-paren-status "1 0" "$s0 $s5"

let 'x = 3 * 7' 'y = x + 1'
check let-assigns "21 22" "$x $y"

declare -i n=10
n+=5
n='n * 2'
check declare-i 30 "$n"

v=7
((v += 3, v *= 2, v -= 1, v /= 3, v %= 4))
check compound-assignments 2 "$v"

arr=(10 20 30)
check array-index 60 "$((arr[0] + arr[1] + arr[2]))"
idx=2
check array-computed-index 30 "$((arr[idx]))"

( echo $((1 / 0)) ) 2>/dev/null
check divide-by-zero-fails 1 "$?"

sum=0
for ((k = 1; k <= 100; k++)); do ((sum += k)); done
check c-style-loop 5050 "$sum"

RANDOM=42
first=$RANDOM
RANDOM=42
second=$RANDOM
check random-seeded "$first" "$second"

empty=
check empty-is-zero 1 "$((empty + 1))"

ref=inner
inner=41
check indirect-name 42 "$((ref + 1))"

check comparison-values "1 0 1" "$((3 == 3)) $((3 != 3)) $((2 <= 3))"
check logical-short-circuit "0 0" "$((0 && (z = 1))) ${z:-0}"
check negative-modulo-power "1 -8" "$((-1 ** 2)) $((-2 ** 3))"
check hex-output ff "$(printf '%x' 255)"
