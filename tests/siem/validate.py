"""Read `mrtr-gate export-audit` lines on stdin and hold each to its format's own definitions:
`otel` lines parse, with protobuf's strict JSON parser (no unknown field), as the OpenTelemetry
protocol's ExportLogsServiceRequest; `ocsf` lines validate as OCSF's API Activity class
(ocsf-pydantic), with no key, at any depth, that the class and its objects do not define.
Usage: validate.py ocsf|otel < lines. Prints `valid N` and exits 0, or names the first line
that is not and exits 1."""

import json
import sys
import types
import typing


def known_keys(model, obj, where):
    """Every key of `obj` is a field of `model` (recursively through nested models)."""
    fields = dict(model.model_fields)
    computed = set(getattr(model, "model_computed_fields", {}))
    for key, value in obj.items():
        if key not in fields and key not in computed:
            raise ValueError(f"{where}.{key} is no field of {model.__name__}")
        if key in computed:
            continue
        for nested in models_of(fields[key].annotation):
            if isinstance(value, dict):
                known_keys(nested, value, f"{where}.{key}")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict):
                        known_keys(nested, item, f"{where}.{key}[{i}]")


def models_of(annotation):
    """The pydantic models an annotation names (through Optional, unions and lists)."""
    if hasattr(annotation, "model_fields"):
        return [annotation]
    out = []
    for arg in typing.get_args(annotation):
        out.extend(models_of(arg))
    return out


def main():
    kind = sys.argv[1]
    if kind == "otel":
        from google.protobuf import json_format
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )

        def check(line):
            json_format.Parse(line, ExportLogsServiceRequest(), ignore_unknown_fields=False)

    elif kind == "ocsf":
        from ocsf.events.application.api import APIActivity

        def check(line):
            obj = json.loads(line)
            APIActivity.model_validate(obj)
            known_keys(APIActivity, obj, "event")

    else:
        sys.exit(f"validate.py: ocsf or otel, not {kind}")
    n = 0
    for n, line in enumerate(sys.stdin, 1):
        try:
            check(line)
        except Exception as e:  # noqa: BLE001 - any failure names the line
            print(f"line {n} is not valid {kind}: {e}\n{line}", file=sys.stderr)
            sys.exit(1)
    print(f"valid {n}")


if __name__ == "__main__":
    main()
