# Here-documents and here-strings: unquoted and quoted delimiters, `<<-`, expansions inside,
# two at once on different fds, one larger than a pipe's buffer.
source "${BASH_SOURCE[0]%/*}/lib.sh"

x=5
out=$(cat <<EOF
v=$x
EOF
)
check unquoted-expands v=5 "$out"

out=$(cat <<'EOF'
v=$x $(echo no) `echo no`
EOF
)
check single-quoted-literal 'v=$x $(echo no) `echo no`' "$out"

out=$(cat <<"EOF"
v=$x
EOF
)
check double-quoted-literal 'v=$x' "$out"

out=$(cat <<\EOF
v=$x
EOF
)
check backslash-delimiter-literal 'v=$x' "$out"

# <<- strips leading tabs (not spaces) from the lines and the delimiter.
out=$(cat <<-EOF
	tabbed
	  mixed
	EOF
)
check dash-strips-tabs $'tabbed\n  mixed' "$out"

out=$(cat <<EOF
sum=$((2 + 3)) cmd=$(echo sub) esc=\$x
EOF
)
check expansions-inside 'sum=5 cmd=sub esc=$x' "$out"

read -r a b <<EOF
first second
EOF
check builtin-reads-heredoc "first second" "$a $b"

out=$({ cat; cat <&3; } <<A 3<<B
from a
A
from b
B
)
check two-heredocs $'from a\nfrom b' "$out"

f() {
    cat <<EOF
in $1
EOF
}
check heredoc-in-function "in fn" "$(f fn)"

# 100 kB: more than a pipe holds, so bash uses a temporary file.
big=$(head -c 100000 /dev/zero | tr '\0' b)
out=$(cat <<EOF | wc -c
$big
EOF
)
check large-heredoc 100001 "$out"

check here-string-adds-newline 4 "$(wc -c <<<abc)"
check here-string-expands "x is 5" "$(cat <<<"x is $x")"

n=0
while read -r word; do n=$((n + ${#word})); done <<EOF
ab
cde
f
EOF
check while-from-heredoc 6 "$n"

out=$(bash <<'EOF'
echo from stdin script $((6 * 7))
EOF
)
check heredoc-as-script "from stdin script 42" "$out"

out=$(cat <<EOF
line1

line3
EOF
)
check blank-line-kept $'line1\n\nline3' "$out"

out=$(cat <<EOF | tr a-z A-Z
piped
EOF
)
check heredoc-into-pipe PIPED "$out"
