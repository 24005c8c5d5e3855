# Redirections: `exec` opening and closing fds, `>&` and `&>`, order of `2>&1`, `<>` on one
# offset, /dev/null, noclobber, `{fd}` allocation, fds inherited by children.
source "${BASH_SOURCE[0]%/*}/lib.sh"

exec 3>three
echo a >&3
echo b >&3
exec 3>&-
check exec-opens-fd $'a\nb' "$(<three)"

{ echo out; echo err >&2; } >&both
check both-with-greater-and $'err\nout' "$(sort both)"

{ echo more; echo more-err >&2; } &>>both
check both-append 4 "$(wc -l <both)"

# 2>&1 first copies where stdout goes now (the pipe), then stdout goes to /dev/null.
out=$({ echo to-out; echo to-err >&2; } 2>&1 >/dev/null)
check dup-order to-err "$out"

echo hello >rw
exec 4<>rw
read -r -u 4 word
echo X >&4
exec 4>&-
check read-write-one-offset $'hello\nX' "$(<rw)"

echo discarded >/dev/null
check dev-null-empty 0 "$(wc -c </dev/null)"
check dev-null-status 0 "$?"

rm -f clobber
set -C
echo first >clobber
echo second 2>/dev/null >clobber
status=$?
echo third >|clobber
set +C
check noclobber "1 third" "$status $(<clobber)"

exec {fd}>dynamic
echo via-fd >&$fd
exec {fd}>&-
(( fd >= 10 )) && placed=high || placed=low
check brace-fd-allocates "high via-fd" "$placed $(<dynamic)"

exec 6>&1 >saved
echo into-file
exec 1>&6 6>&-
check restore-stdout into-file "$(<saved)"

cat 2>/dev/null <missing-file
check missing-input-status 1 "$?"

echo x 2>/dev/null >&9
check bad-fd-status 1 "$?"

: >log
for i in 1 2 3; do echo $i >>log; done
check append-three $'1\n2\n3' "$(<log)"

exec 7>inherited
sh -c 'echo child >&7'
exec 7>&-
check child-inherits-fd child "$(<inherited)"

# A redirection on a builtin does not outlive it.
echo once >only-once
echo after >other
check builtin-redirect-scoped "once after" "$(<only-once) $(<other)"

# bash itself understands /dev/stdout and /dev/stderr in redirections.
out=$( { echo to-stderr >/dev/stderr; } 2>&1)
check dev-stderr to-stderr "$out"
out=$(echo to-stdout >/dev/stdout)
check dev-stdout to-stdout "$out"

exec 5<three
read -r first <&5
read -r second <&5
exec 5<&-
check fd-keeps-offset "a b" "$first $second"

# Moving an fd: 8>&3- closes 3.
exec 3>moved
exec 8>&3-
echo moved-line >&8
echo bad 2>/dev/null >&3
status=$?
exec 8>&-
check move-fd "moved-line 1" "$(<moved) $status"

check dev-null-listed /dev/null "$(ls /dev/null)"

printf 'no newline' >truncate-me
: >truncate-me
check truncate-with-colon 0 "$(wc -c <truncate-me)"

out=$(cat /dev/zero | head -c 5 | wc -c)
check dev-zero-reads 5 "$out"
