#!/usr/bin/env bash
# Builds the documentation site (docs/) with Sphinx, treating every warning as an error: a broken link,
# an unknown reference, a page in no table of contents or a docstring that does not parse fails it.
#   scripts/docs.sh [OUT]           build into OUT (default build-docs/), the site's front page OUT/index.html
#   scripts/docs.sh serve [PORT]    build into build-docs/, then serve it on http://localhost:PORT (8000)
#   scripts/docs.sh screenshots [BUILD]
#                                   take the HTML report's picture from the browser tests' latest run in
#                                   BUILD (default build/, its test-artifacts/html) into docs/images/
# The generator and its theme are pinned (below) in a virtual environment of their own, made like
# PyTorch's (scripts/pinned-environment.sh): GPULEAK_DOCS_DIR (default
# ~/.cache/gpuleak/docs-sphinx-<version>-py<X.Y>), GPULEAK_DOCS_PYTHON (default pyenv's newest CPython
# 3.12, else 3.13, 3.11), GPULEAK_WHEEL_CACHE (default ~/.cache/gpuleak/wheels).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

readonly sphinx_version=9.0.4
# Sphinx with MyST (Markdown pages) and the Furo theme, and exactly their dependencies.
readonly requirements=(
    "sphinx==${sphinx_version}" furo==2025.12.19 myst-parser==5.2.0
    accessible-pygments==0.0.5 alabaster==1.0.0 babel==2.19.0 beautifulsoup4==4.15.0
    certifi==2026.10.19.post1 charset-normalizer==3.5.3 docutils==0.22.4 idna==3.21 imagesize==2.0.1
    jinja2==3.1.6 markdown-it-py==4.3.0 markupsafe==3.0.4 mdit-py-plugins==0.7.0 mdurl==0.1.2
    packaging==26.4 pygments==2.21.0 pyyaml==6.0.4 requests==2.34.2 roman-numerals==4.1.0
    snowballstemmer==3.1.1 soupsieve==4.1.4 sphinx-basic-ng==1.0.0b2 sphinxcontrib-applehelp==2.0.0
    sphinxcontrib-devhelp==2.0.0 sphinxcontrib-htmlhelp==2.1.0 sphinxcontrib-jsmath==2.0.0
    sphinxcontrib-qthelp==2.0.0 sphinxcontrib-serializinghtml==2.0.0 typing-extensions==4.16.0
    urllib3==2.8.0
)
# The page the README shows: the leak scenario of tests/analyzer/render/html, in the light theme.
readonly screenshot=leak-light.png

# shellcheck source=scripts/pinned-environment.sh
source "$root/scripts/pinned-environment.sh"

docs_environment() {
    local python dir
    python=${GPULEAK_DOCS_PYTHON:-$(pyenv_python docs 12 13 11)}
    dir=$(pinned_environment_dir "$python" "docs-sphinx-${sphinx_version}" "${GPULEAK_DOCS_DIR:-}")
    install_pinned_environment docs "$python" "$dir" "${requirements[@]}" >&2
    echo "$dir"
}

# Builds the site into $2 with the environment $1.
build_site() {
    local environment=$1 out=$2
    # -E: every page read again, so a warning is never hidden by an earlier build's cache.
    "$environment/bin/python" -m sphinx -b html -W --keep-going -n -E -q -d "$out/.doctrees" \
        "$root/docs" "$out"
    echo "docs: built $out/index.html" >&2
}

case ${1:-} in
serve)
    port=${2:-8000}
    [[ $port =~ ^[0-9]+$ ]] || { echo "docs: serve takes a port number, not '$port'" >&2; exit 2; }
    environment=$(docs_environment)
    build_site "$environment" "$root/build-docs"
    echo "docs: serving http://localhost:$port (Ctrl-C stops)" >&2
    exec "$environment/bin/python" -m http.server "$port" --bind 127.0.0.1 --directory "$root/build-docs"
    ;;
screenshots)
    artifacts=${2:-$root/build}/test-artifacts/html
    if [[ ! -f $artifacts/$screenshot ]]; then
        echo "docs: no $artifacts/$screenshot: run the browser tests first (ctest -R html_report)" >&2
        exit 1
    fi
    mkdir -p "$root/docs/images"
    cp "$artifacts/$screenshot" "$root/docs/images/html-report.png"
    echo "docs: docs/images/html-report.png from $artifacts/$screenshot" >&2
    ;;
-*)
    echo "docs: unknown option '$1' (usage: scripts/docs.sh [OUT] | serve [PORT] | screenshots [BUILD])" >&2
    exit 2
    ;;
*)
    build_site "$(docs_environment)" "$(realpath -m "${1:-$root/build-docs}")"
    ;;
esac
