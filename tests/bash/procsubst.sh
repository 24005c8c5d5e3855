# Process substitution: bash passes `/dev/fd/N` names for `<(...)` and `>(...)`, so every
# case here needs the kernel to open /dev/fd/N (a duplicate of the open fd N).
source "${BASH_SOURCE[0]%/*}/lib.sh"

check_match names-dev-fd '^/dev/fd/[0-9]+$' "$(echo <(true))"

check cat-reads-input hi "$(cat <(echo hi))"

out=$(paste -d , <(printf '1\n2\n') <(printf 'a\nb\n'))
check two-inputs $'1,a\n2,b' "$out"

n=0
while read -r line; do n=$((n + line)); done < <(seq 1 10)
check loop-reads-here 55 "$n"

echo to-output > >(cat >written)
wait $!
check output-substitution to-output "$(<written)"

diff <(echo same) <(echo same) >/dev/null
check diff-equal 0 "$?"

mapfile -t rows < <(printf 'r1\nr2\n')
check mapfile-from-substitution "2 r2" "${#rows[@]} ${rows[1]}"
