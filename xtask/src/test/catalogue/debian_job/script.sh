# Debian's bash on Reef: functions, arrays, $(...), pipes, redirections; coreutils, grep, find.
cd "$1"
square() { echo $(( $1 * $1 )); }
numbers=(3 1 2)
declare -A colours=([sky]=blue [grass]=green)
for n in "${numbers[@]}"; do square "$n"; done | sort -n > "$2/squares"
echo "squares: $(tr '\n' ' ' < "$2/squares")"
echo "sky is ${colours[sky]}, ${#numbers[@]} numbers, $(wc -l < "$2/squares") lines"
exec 3> "$2/fd3"; echo to-fd-3 >&3; exec 3>&-; cat "$2/fd3"
ls -ln --time-style=+%s data
grep -rn needle data | sort
find data -type f -name '*.txt' -exec sha256sum {} + | sort
sort -r data/words.txt | head -2
