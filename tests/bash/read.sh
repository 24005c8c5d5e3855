# `read`: -r, -d, -n, -N, -t, -a, -u, IFS splitting, from here-strings, pipes and files,
# and mapfile.
source "${BASH_SOURCE[0]%/*}/lib.sh"

read -r x <<<'a\b'
check r-keeps-backslash 'a\b' "$x"
read x <<<'a\b'
check backslash-escapes ab "$x"

IFS=: read -r a b c <<<'x:y:z:w'
check ifs-last-takes-rest "x y z:w" "$a $b $c"

read -r a b <<<'   lead   and   trail   '
check default-ifs-trims "lead|and   trail" "$a|$b"
IFS= read -r line <<<'   kept   '
check empty-ifs-keeps '   kept   ' "$line"

IFS=, read -r a b c <<<'1,,3'
check empty-field "1||3" "$a|$b|$c"

read -r -d , x <<<'one,two'
check d-delimiter one "$x"

printf 'a\0b\0' >nul-separated
{
    read -r -d '' x
    read -r -d '' y
} <nul-separated
check d-empty-is-nul ab "$x$y"

read -r -n 3 x <<<abcdef
check n-reads-three abc "$x"
read -r -n 10 x <<<'ab'
check n-stops-at-newline ab "$x"
read -r -N 4 x <<<$'a\nbcd'
check capital-n-exact $'a\nbc' "$x"

# Nothing comes for a second: read gives up after 0.2 s with a status above 128.
sleep 1 | {
    read -r -t 0.2 x
    echo $? >timeout-status
}
status=$(<timeout-status)
(( status > 128 )) && verdict=timeout || verdict="status $status"
check t-times-out timeout "$verdict"

read -r -t 0.5 x <<<'in time'
check t-reads-in-time "in time" "$x"

read -t 0 <<<'x'
check t-zero-probe 0 "$?"

read -r -a arr <<<'p q r'
check a-splits-to-array "3 q" "${#arr[@]} ${arr[1]}"

exec 4<<<'fd four'
read -r -u 4 x
exec 4<&-
check u-reads-fd "fd four" "$x"

out=$(printf '1\n2\n3\n' | while read -r n; do s=$((s + n)); echo $s; done | tail -n 1)
check while-read-pipe 6 "$out"

printf 'a\nb' | {
    read -r x
    read -r y
    echo "$?:$y" >last-line
}
check last-line-without-newline "1:b" "$(<last-line)"

printf 'l1\nl2 with spaces\n\nl4\n' >lines
n=0
while IFS= read -r line; do n=$((n + 1)); last=$line; done <lines
check while-read-file "4 l4" "$n $last"

mapfile -t rows <lines
check mapfile-lines "4|l2 with spaces|" "${#rows[@]}|${rows[1]}|${rows[2]}"

read -r <<<'reply var'
check reply-default "reply var" "$REPLY"

read -r x </dev/null
check eof-status "1" "$?"

echo 'one two three' | {
    read -r first rest
    echo "$first/$rest" >split
}
check pipe-split "one/two three" "$(<split)"

IFS=$'\n' read -r -d '' -a all <lines
check d-empty-whole-input "3 l4" "${#all[@]} ${all[2]}"
