"""A loopback OpenLineage collector for tests, and the checks every event it receives must pass:
the OpenLineage 2-0-2 JSON schema and its facets' schemas (jsonschema, offline copies in
tests/fixtures/openlineage), and a parse into openlineage-python's own event classes."""
import glob
import http.server
import json
import os
import threading
import time

import attr
import jsonschema
import referencing
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    RunFacet,
    catalog_dataset,
    datasource_dataset,
    dataset_version_dataset,
    job_type_job,
    lifecycle_state_change_dataset,
    output_statistics_output_dataset,
    processing_engine_run,
    schema_dataset,
    symlinks_dataset,
)
from openlineage.client.serde import Serde

SPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "openlineage")


def _registry():
    resources = []
    for path in [os.path.join(SPEC, "OpenLineage.json")] + glob.glob(os.path.join(SPEC, "facets", "*.json")):
        with open(path) as f:
            schema = json.load(f)
        resources.append((schema["$id"], referencing.Resource.from_contents(schema)))
    return referencing.Registry().with_resources(resources)


REGISTRY = _registry()
RUN_EVENT = jsonschema.Draft202012Validator(
    {"$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"}, registry=REGISTRY,
    format_checker=jsonschema.FormatChecker())


def _facets(event):
    """Every facet container of the event: (container, where)."""
    yield event["run"].get("facets", {}), "run"
    yield event["job"].get("facets", {}), "job"
    for kind in ("inputs", "outputs"):
        for d in event.get(kind, []):
            yield d.get("facets", {}), f"{kind} {d['name']}"
            yield d.get("outputFacets", {}), f"{kind} {d['name']} outputFacets"


def validate(event):
    """Fails unless `event` is a valid RunEvent whose standard facets each validate against their
    own schema (a facet skade defines, named by a urn:, only against BaseFacet)."""
    RUN_EVENT.validate(event)
    for facets, where in _facets(event):
        for key, facet in facets.items():
            url = facet["_schemaURL"]
            if url.startswith("urn:skade:"):
                continue
            validator = jsonschema.Draft202012Validator({"$ref": url}, registry=REGISTRY)
            errors = list(validator.iter_errors({key: facet}))
            assert not errors, f"{where} facet {key}: {errors[0].message}"


@attr.define
class SkadeCommitRunFacet(RunFacet):
    """skade's run facet (docs/design/lineage.md): the commit range of the run."""
    commitSeq: int  # noqa: N815
    firstCommitSeq: int  # noqa: N815
    operation: str
    actor: str
    catalog: str


def _base(cls, facet, **fields):
    plain = {k: v for k, v in facet.items() if not k.startswith("_")}
    plain.update(fields)
    f = cls(**plain)
    f._producer, f._schemaURL = facet["_producer"], facet["_schemaURL"]
    return f


def _schema_fields(fields):
    return [schema_dataset.SchemaDatasetFacetFields(
        name=f["name"], type=f.get("type"), description=f.get("description"),
        fields=_schema_fields(f["fields"]) if "fields" in f else None) for f in fields]


DATASET_FACETS = {
    "dataSource": lambda f: _base(datasource_dataset.DatasourceDatasetFacet, f),
    "version": lambda f: _base(dataset_version_dataset.DatasetVersionDatasetFacet, f),
    "lifecycleStateChange": lambda f: _base(
        lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet, f,
        lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange(f["lifecycleStateChange"])),
    "schema": lambda f: _base(schema_dataset.SchemaDatasetFacet, f, fields=_schema_fields(f["fields"])),
    "symlinks": lambda f: _base(symlinks_dataset.SymlinksDatasetFacet, f, identifiers=[
        symlinks_dataset.Identifier(**i) for i in f["identifiers"]]),
    "catalog": lambda f: _base(catalog_dataset.CatalogDatasetFacet, f),
}


def parse(event):
    """The event as openlineage-python's RunEvent (its validators run), checked to serialize back
    to the same JSON."""
    def dataset(cls, d):
        kwargs = {"namespace": d["namespace"], "name": d["name"],
                  "facets": {k: DATASET_FACETS[k](v) for k, v in d.get("facets", {}).items()}}
        if "outputFacets" in d:
            kwargs["outputFacets"] = {"outputStatistics": _base(
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet,
                d["outputFacets"]["outputStatistics"])}
        return cls(**kwargs)

    rf = event["run"]["facets"]
    run = Run(runId=event["run"]["runId"], facets={
        "processing_engine": _base(processing_engine_run.ProcessingEngineRunFacet, rf["processing_engine"]),
        "skade_commit": _base(SkadeCommitRunFacet, rf["skade_commit"]),
    })
    job = Job(namespace=event["job"]["namespace"], name=event["job"]["name"], facets={
        "jobType": _base(job_type_job.JobTypeJobFacet, event["job"]["facets"]["jobType"])})
    parsed = RunEvent(eventType=RunState(event["eventType"]), eventTime=event["eventTime"], run=run, job=job,
                      producer=event["producer"],
                      inputs=[dataset(InputDataset, d) for d in event["inputs"]],
                      outputs=[dataset(OutputDataset, d) for d in event["outputs"]])
    again = _pruned(json.loads(Serde.to_json(parsed)))
    assert again == _pruned(event), f"openlineage-python reads the event differently: {_difference(event, again)}"
    return parsed


def _pruned(value):
    """Without empty members (openlineage-python writes its defaults, as `{}`, for fields unset)."""
    if isinstance(value, dict):
        return {k: _pruned(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _difference(a, b, where=""):
    """Where two JSON values first differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _difference(a.get(k), b.get(k), f"{where}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _difference(x, y, f"{where}[{i}]")
    return f"{where}: {a!r} != {b!r}"


class Collector:
    """An HTTP server on 127.0.0.1 that records the events POSTed to /api/v1/lineage.

    `mode`: "up" (201), "down" (503), "hang" (answers nothing until the mode changes), or a
    function of the event returning the status to answer."""

    def __init__(self, path="/api/v1/lineage"):
        self.events, self.requests, self.headers = [], 0, []
        self.mode = "up"
        self._changed = threading.Condition()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector._changed:
                    collector.requests += 1
                    while collector.mode == "hang":
                        collector._changed.wait()
                    mode = collector.mode
                event = json.loads(body)
                status = {"up": 201, "down": 503}[mode] if isinstance(mode, str) else mode(event)
                if self.path != path:
                    status = 404
                if status < 300:
                    with collector._changed:
                        collector.events.append(event)
                        collector.headers.append(dict(self.headers))
                        collector._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else f"refused with {status}".encode())

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_port}"

    def set_mode(self, mode):
        with self._changed:
            self.mode = mode
            self._changed.notify_all()

    def wait_for(self, n, timeout=20):
        """The events once at least n arrived (fails after timeout seconds)."""
        end = time.time() + timeout
        with self._changed:
            while len(self.events) < n:
                left = end - time.time()
                assert left > 0, f"the collector got {len(self.events)} events, not {n}, in {timeout} s"
                self._changed.wait(left)
            return list(self.events)

    def close(self):
        self.set_mode("down")
        self.server.shutdown()
        self.server.server_close()
