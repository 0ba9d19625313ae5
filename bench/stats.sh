# Sourced by the benchmark scripts.

stat_of() { # median, minimum and maximum of the figures in file $1, one per line
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        printf "%s %s %s\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'
}
