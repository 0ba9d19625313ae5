# Sourced by the benchmark scripts.

stat_of() { # median, minimum and maximum of the figures in file $1, one per line
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        printf "%s %s %s\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'
}

# The figure named $3 (ns_per_pair, cpu_ns_per_pair) of the result line "$1 ... name=value ..." that
# program $1 wrote into the file $2; fails, showing the file, when there is none.
figure_of() {
    local value
    value=$(sed -n "s/^$1 .* $3=\([0-9.]*\)\( .*\)\{0,1\}\$/\1/p" "$2")
    if [[ -z $value ]]; then
        echo "$(basename "$0" .sh): no result line of $1 in this output:" >&2
        cat "$2" >&2
        return 1
    fi
    echo "$value"
}
