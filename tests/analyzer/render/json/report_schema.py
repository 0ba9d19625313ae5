"""docs/reference/report.schema.json, and how a document of gpuleak-report --format json breaks it: for the
tests that read such documents (test_json_schema.py here, tests/torch, tests/jax)."""

import json
import pathlib

import jsonschema

SCHEMA_FILE = pathlib.Path(__file__).resolve().parents[4] / "docs" / "reference" / "report.schema.json"


def load_schema():
    return json.loads(SCHEMA_FILE.read_text())


def validation_problems(document, schema=None):
    """Each way `document` breaks the schema, as `path: message`, by path."""
    validator = jsonschema.Draft202012Validator(load_schema() if schema is None else schema)
    return sorted("%s: %s" % (error.json_path, error.message) for error in validator.iter_errors(document))


def assert_valid_report(path):
    """The JSON file at `path` is valid under the schema."""
    with open(path) as document:
        problems = validation_problems(json.load(document))
    assert problems == [], "%s is not valid under %s:\n%s" % (path, SCHEMA_FILE, "\n".join(problems[:20]))
