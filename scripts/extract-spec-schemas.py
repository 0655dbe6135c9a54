#!/usr/bin/env python3
"""Copies the parts of the published OpenAPI documents that the fixture conformance test needs
(the routes below, and every schema they reference) from ../shared/specs into
Tests/LabstreamIntegrationTests/Specs, so the test does not depend on files outside the repo.
Run it again when a spec is updated; the source file's SHA-256 is recorded."""
import hashlib, json, os, sys
try:
    import yaml   # only for the Plex documents (YAML); python3-yaml
except ImportError:
    yaml = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "..", "shared", "specs")
OUT = os.path.join(ROOT, "Tests", "LabstreamIntegrationTests", "Specs")
ROUTES = {
    "jellyfin-openapi.json": ["/System/Info/Public", "/Users/AuthenticateByName", "/UserViews", "/Items",
                              "/Shows/{seriesId}/Seasons", "/Shows/{seriesId}/Episodes", "/Users/Me", "/Users"],
    "emby-openapi.json": ["/System/Info/Public", "/Users/AuthenticateByName", "/Users/{UserId}/Views", "/Users/{UserId}/Items",
                          "/Shows/{Id}/Seasons", "/Shows/{Id}/Episodes", "/Users/{Id}", "/Users/Query",
                          "/Sync/Jobs", "/Sync/Items/Ready", "/Sync/Jobs/{Id}"],
    "plex-api-spec.yaml": ["/identity", "/library/sections/all", "/library/sections/{sectionId}/all", "/library/metadata/{ids}",
                           "/downloadQueue", "/downloadQueue/{queueId}/add", "/downloadQueue/{queueId}/items/{itemId}"],
    "plex-api-spec-v0.0.3-dereferenced.yaml": ["/pins", "/pins/{pinID}", "/resources"],
}

def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/components/schemas/"):
            out.add(r.split("/")[-1])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)

for name, routes in ROUTES.items():
    raw = open(os.path.join(SPECS, name), "rb").read()
    if name.endswith(".yaml"):
        if yaml is None:
            print(name, "skipped: python3-yaml is not installed")
            continue
        spec = yaml.safe_load(raw)
        name = name[:-len(".yaml")] + ".json"
    else:
        spec = json.loads(raw)
    # The success answer: 200, or 201 for a creation (plex.tv's POST /pins); stored as "200".
    paths = {p: {m: {"responses": {"200": op["responses"].get("200", op["responses"].get("201", {}))}} for m, op in spec["paths"][p].items()
                 if m in ("get", "post")} for p in routes}
    schemas = spec.get("components", {}).get("schemas", {})   # a dereferenced document has none
    wanted, queue = set(), set()
    refs(paths, queue)
    while queue:
        s = queue.pop()
        if s in wanted:
            continue
        wanted.add(s)
        refs(schemas[s], queue)
    out = {"x-source": {"file": name, "sha256": hashlib.sha256(raw).hexdigest(), "version": spec["info"]["version"]},
           "paths": paths, "components": {"schemas": {s: schemas[s] for s in sorted(wanted)}}}
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(name, len(wanted), "schemas,", os.path.getsize(os.path.join(OUT, name)), "bytes")
