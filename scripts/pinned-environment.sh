# Sourced by scripts/setup-torch.sh, setup-jax.sh, setup-tensorflow.sh and docs.sh: a virtual environment
# of exactly a pinned list of wheels, installed with --no-deps from a wheel cache, so that it is the same
# on every machine and a rebuilt one costs no download.

# pyenv's newest CPython of the first of the given minor versions that is installed, e.g.
# `pyenv_python torch 12 13 11 10`; `label` names the caller in the error when there is none.
pyenv_python() {
    local label=$1 minor candidate newest
    shift
    for minor in "$@"; do
        newest=""
        for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3."$minor"; do
            [[ -x $candidate ]] || continue
            newest=$(printf '%s\n%s\n' "$newest" "$candidate" | sort -V | tail -n 1)
        done
        if [[ -n $newest ]]; then
            echo "$newest"
            return
        fi
    done
    echo "setup-$label: no CPython$(printf ' 3.%s' "$@") under pyenv; set GPULEAK_${label^^}_PYTHON" >&2
    exit 1
}

# Where the environment named `name` (its pinned package and version, "torch-2.11.0") of `python` goes:
# `override` where the caller's variable set it, else ~/.cache/gpuleak/<name>-py<X.Y>.
pinned_environment_dir() {
    local python=$1 name=$2 override=$3
    if [[ -n $override ]]; then
        echo "$override"
        return
    fi
    echo "$HOME/.cache/gpuleak/$name-py$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
}

# Makes `dir` a virtual environment of `python` holding exactly `requirements` (the arguments after
# `dir`), downloading into the wheel cache (GPULEAK_WHEEL_CACHE, default ~/.cache/gpuleak/wheels) only
# what it lacks. Idempotent: an environment whose completion stamp (written last, holding the list it was
# built from) matches is left as it is, without touching the network; an interrupted or outdated one is
# built again. Two concurrent runs (parallel ctest, two terminals) wait for each other.
install_pinned_environment() {
    local label=$1 python=$2 dir=$3 wheels=${GPULEAK_WHEEL_CACHE:-$HOME/.cache/gpuleak/wheels} lock
    shift 3
    local stamp=$dir/.gpuleak-$label-complete
    mkdir -p "$(dirname "$dir")" "$wheels"
    exec {lock}>"$dir.lock"
    flock "$lock"
    if [[ -f $stamp && $(cat "$stamp") == "$*" ]]; then
        return
    fi
    echo "setup-$label: installing $1 into $dir" >&2
    rm -rf "$dir"
    # pip skips the wheels already in the cache (it still asks the index for their names).
    PIP_ROOT_USER_ACTION=ignore "$python" -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$wheels" "$@"
    "$python" -m venv "$dir"
    PIP_ROOT_USER_ACTION=ignore "$dir/bin/python" -m pip install --quiet --no-index --no-deps \
        --find-links "$wheels" "$@"
    echo "$*" >"$stamp"
}
