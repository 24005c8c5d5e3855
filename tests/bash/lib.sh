# The bash suite's helpers, sourced by every case script: each case prints one line,
# `CASE <script>/<name> ok` or `CASE <script>/<name> fail <detail>`, which the harness
# (xtask/src/test/catalogue/bash_suite.rs) compares between the host and Reef.

# run.sh names the script's scratch directory: a script that `on` started on another core
# begins elsewhere. No case reads the console.
if [[ -n $BASH_SUITE_SCRATCH ]]; then
    cd "$BASH_SUITE_SCRATCH" || exit 1
fi
exec </dev/null

# The script's name, the first half of every case name.
SUITE_SCRIPT=${BASH_SOURCE[1]##*/}
SUITE_SCRIPT=${SUITE_SCRIPT%.sh}

# check NAME EXPECTED ACTUAL: ok when the two strings are equal; the detail quotes both with
# printf %q so that a newline in either cannot break the one-line rule.
check() {
    if [[ "$2" == "$3" ]]; then
        echo "CASE $SUITE_SCRIPT/$1 ok"
    else
        echo "CASE $SUITE_SCRIPT/$1 fail expected $(printf %q "$2") got $(printf %q "$3")"
    fi
}

# check_match NAME PATTERN ACTUAL: ok when ACTUAL matches the extended regular expression,
# for output that holds a pid or a time.
check_match() {
    if [[ "$3" =~ $2 ]]; then
        echo "CASE $SUITE_SCRIPT/$1 ok"
    else
        echo "CASE $SUITE_SCRIPT/$1 fail no match for $(printf %q "$2") in $(printf %q "$3")"
    fi
}
