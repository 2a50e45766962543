"""Pulumi's own floor: the benchmark copies this file into a temporary program as `__main__.py`.

It registers the same tree as devstack (one workspace component, one
component per project, one dynamic resource per declaration, with inputs of
the same shape) from the same kind of entry point, but its dynamic provider
does no work at all. What a run of this program costs is what Pulumi and a
Python dynamic provider cost.
"""

import asyncio

import pulumi
from pulumi.dynamic import Resource

from noop_provider import NoOp  # copied beside this file: pickled by reference

# Kept in sync with bench.workload.MIX by hand: this file runs without the bench package.
MIX = [("pg", "postgres", "database"), ("cache", "redis", "acl_user"), ("objects", "minio", "bucket"),
       ("aws", "localstack", "queue"), ("events", "nats", "stream"), ("kafka", "kafka", "topic")]


class Tenant(Resource):
    host: pulumi.Output[str]
    port: pulumi.Output[int]

    def __init__(self, name, props, opts=None):
        super().__init__(NoOp(), name, {**props, "host": None, "port": None}, opts)


async def main() -> pulumi.Inputs:
    """Register the tree; return one stack output per project, as devstack's __main__.py does."""
    config = pulumi.Config("bench")
    prefix, size = config.require("prefix"), config.require_int("size")
    workspace = pulumi.ComponentResource("bench:index:Workspace", "bench")
    projects, outputs = {}, {}
    for i in range(size):
        project_name = f"{prefix}-{i // len(MIX):03d}"
        instance, engine, kind = MIX[i % len(MIX)]
        if project_name not in projects:
            if projects:
                await asyncio.sleep(0)  # as devstack: yield once each project is declared
            projects[project_name] = pulumi.ComponentResource(
                "bench:index:Project", project_name, None, pulumi.ResourceOptions(parent=workspace))
            outputs[project_name] = {}
        props = {"engine": engine, "instance": instance, "kind": kind, "name": project_name, "owner": project_name,
                 "params": {}, "credentials": "predictable", "purge": True, "stack": pulumi.get_stack()}
        resource = Tenant(f"{project_name}/{instance}/{kind}/{project_name}", props,
                          pulumi.ResourceOptions(parent=projects[project_name]))
        outputs[project_name][f"{instance}/{kind}/{project_name}"] = {"host": resource.host, "port": resource.port}
    await asyncio.sleep(0)  # ... the last one too
    return {name: {"resources": resources, "services": {}} for name, resources in outputs.items()}


pulumi.run(main)
