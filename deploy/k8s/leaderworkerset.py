"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) in check_manifests.py.

kubernetes-validate knows only the built-in kinds, so a LeaderWorkerSet is
validated here against schemas/leaderworkerset-v1.json (the fields deploy/k8s
uses, strictly), and its pod templates are handed back to be checked like a
Deployment's: as core/v1 PodTemplates by kubernetes-validate, and by the
project's pod rules.
"""
import json
import os

import jsonschema

KIND = "LeaderWorkerSet"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas",
                           "leaderworkerset-v1.json")
# Restart policies under which a lost pod restarts its whole group: an MPI
# world cannot take a rank back.
GROUP_RESTARTS = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def is_lws(doc):
    return doc.get("kind") == KIND


def _validator(cache={}):
    if "v" not in cache:
        with open(SCHEMA_PATH) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        cache["v"] = jsonschema.Draft202012Validator(schema)
    return cache["v"]


def name_of(doc):
    return (doc.get("metadata") or {}).get("name", "?")


def schema_problems(doc):
    """The schema's complaints about one LeaderWorkerSet, each naming its field."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{KIND} {name_of(doc)}: {'.'.join(map(str, e.absolute_path)) or '(object)'}: "
            f"{e.message}" for e in errors]


def templates(doc):
    """[(role, PodTemplateSpec)] of a LeaderWorkerSet: the leader's, then the
    workers'. Without a leaderTemplate the leader uses the workers' (once).
    A template without a spec holding containers is left out (the schema
    reports it)."""
    lwt = (doc.get("spec") or {}).get("leaderWorkerTemplate") or {}
    found = [(role, lwt.get(role)) for role in ("leaderTemplate", "workerTemplate")]
    return [(role, t) for role, t in found if isinstance(t, dict) and
            isinstance(t.get("spec"), dict) and isinstance(t["spec"].get("containers"), list)]


def as_pod_templates(doc):
    """core/v1 PodTemplate objects wrapping the pod templates, for
    kubernetes-validate; each is named <lws>-<role> (e.g. tandem-worker-
    leadertemplate) so that its complaints say where they come from."""
    return [{"apiVersion": "v1", "kind": "PodTemplate",
             "metadata": {"name": f"{name_of(doc)}-{role.lower()}"}, "template": t}
            for role, t in templates(doc)]


def rule_problems(doc):
    """Project rules a LeaderWorkerSet's own fields must keep."""
    lwt = (doc.get("spec") or {}).get("leaderWorkerTemplate") or {}
    policy = lwt.get("restartPolicy", GROUP_RESTARTS[0])
    if policy not in GROUP_RESTARTS:
        return [f"{KIND} {name_of(doc)}: restartPolicy {policy} would restart a lost pod alone; "
                f"its group's MPI world needs one of {', '.join(GROUP_RESTARTS)}"]
    return []
