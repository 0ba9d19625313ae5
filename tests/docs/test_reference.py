"""The reference pages of the manual against the code they describe: a flag or a variable added to the code
without its row in docs/reference/ fails here, and so does a row left behind by one removed.

GPULEAK_TEST_LAUNCHER and GPULEAK_TEST_REPORT name the built `gpuleak` and `gpuleak-report`."""
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFERENCE = os.path.join(ROOT, "docs", "reference")
LAUNCHER = os.environ.get("GPULEAK_TEST_LAUNCHER", os.path.join(ROOT, "build", "launcher", "gpuleak"))
REPORT = os.environ.get("GPULEAK_TEST_REPORT", os.path.join(ROOT, "build", "analyzer", "gpuleak-report"))
# Where the code that users and developers run reads its variables: the programs, the library, the
# simulated device, the Python package, the adapter's build, and the set-up and test scripts. The tests'
# own variables (GPULEAK_TEST_*) are not for users.
SOURCE_FOLDERS = ["analyzer", "common", "include", "interpose", "launcher", "python", "scripts", "simdevice",
                  "torch_adapter"]


def read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


# CLI11's help: an option's line starts with its names ("  -o,--output TEXT", "  --quiet"); a subcommand's,
# under "Subcommands:", with its name.
def help_options(text):
    options = set()
    for line in text.splitlines():
        match = re.match(r"\s{2}(-[A-Za-z],)?(--[a-z][a-z0-9-]*)", line)
        if match:
            options.add(match.group(2))
    return options


def help_subcommands(text):
    names, listing = [], False
    for line in text.splitlines():
        if not line.strip():
            listing = False
        elif line.startswith("Subcommands:"):
            listing = True
        elif listing:
            names.append(line.split()[0])
    return names


def commands():
    """Every command of both programs, found through their --help: (title, its --help's text)."""
    found, pending = [], [("gpuleak", [LAUNCHER])]
    while pending:
        title, argv = pending.pop(0)
        text = help_of(argv)
        subcommands = help_subcommands(text)
        if subcommands:
            pending.extend(("%s %s" % (title, name), argv + [name]) for name in subcommands)
        else:
            found.append((title, text))
    return found + [("gpuleak-report", help_of([REPORT]))]


def help_of(argv):
    completed = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


# A page's sections by their "## " titles.
def sections(page):
    found, title = {}, None
    for line in page.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            found[title] = []
        elif title is not None:
            found[title].append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


# The long options a section documents: those in the first cell of its tables' rows, in backticks.
def documented_options(section):
    options = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split(" | ")[0]
            options.update(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", first_cell))
    return options


def missing_and_stale(in_help, documented):
    return sorted(in_help - documented), sorted(documented - in_help)


def test_every_option_of_every_command_has_its_row_in_the_command_line_reference():
    page = sections(read(os.path.join(REFERENCE, "command-line.md")))
    problems = []
    found = commands()
    assert len(found) >= 7, found
    for title, help_text in found:
        if title not in page:
            problems.append("%s: no section '## %s'" % (title, title))
            continue
        missing, stale = missing_and_stale(help_options(help_text), documented_options(page[title]))
        problems += ["%s: %s is not in docs/reference/command-line.md" % (title, option) for option in missing]
        problems += ["%s: %s is documented but not in its --help" % (title, option) for option in stale]
    assert not problems, "\n".join(problems)


def test_the_option_check_reports_an_undocumented_and_a_stale_option():
    help_text = "Options:\n  -h,--help  Print\n  -o,--output TEXT  directory\n  --new-flag  new\n"
    section = "| `-o, --output DIR` | directory | |\n| `-h, --help` | help | |\n| `--gone N` | old | |\n"
    assert missing_and_stale(help_options(help_text), documented_options(section)) == (["--new-flag"], ["--gone"])


# A variable is read where its name is a string in C, C++ or Python ("GPULEAK_MAX_MB": getenv, os.environ)
# or expanded in a shell script ($GPULEAK_X, ${GPULEAK_X:-...}).
def variables_in(path, text):
    if path.endswith(".sh"):
        return set(re.findall(r"\$\{?(GPULEAK_[A-Z0-9_]*[A-Z0-9])", text))
    return set(re.findall(r"\"(GPULEAK_[A-Z0-9_]*[A-Z0-9])\"", text))


def variables_read_by_the_code():
    variables = set()
    for folder in SOURCE_FOLDERS:
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".c", ".cpp", ".h", ".py", ".sh")):
                    path = os.path.join(directory, name)
                    variables |= variables_in(path, read(path))
    return variables


def documented_variables(page):
    return set(re.findall(r"^\| `(GPULEAK_[A-Z0-9_]+)`", page, re.MULTILINE))


def test_every_variable_the_code_reads_has_its_row_in_the_environment_reference():
    read_by_code = variables_read_by_the_code()
    assert len(read_by_code) >= 30, sorted(read_by_code)
    documented = documented_variables(read(os.path.join(REFERENCE, "environment.md")))
    missing, stale = missing_and_stale(read_by_code, documented)
    assert not missing, "read by the code but not in docs/reference/environment.md: %s" % ", ".join(missing)
    assert not stale, "in docs/reference/environment.md but read by no code: %s" % ", ".join(stale)


@pytest.mark.parametrize(
    "path, text, expected",
    [
        ("a.cpp", 'std::getenv("GPULEAK_NEW_SETTING"); // GPULEAK_IN_A_COMMENT', {"GPULEAK_NEW_SETTING"}),
        ("a.py", 'os.environ.get("GPULEAK_NEW_SETTING")', {"GPULEAK_NEW_SETTING"}),
        ("a.sh", 'dir=${GPULEAK_NEW_DIR:-$HOME}; echo "$GPULEAK_OTHER"', {"GPULEAK_NEW_DIR", "GPULEAK_OTHER"}),
    ],
)
def test_the_variable_check_finds_a_variable_read_in_each_language(path, text, expected):
    assert variables_in(path, text) == expected
