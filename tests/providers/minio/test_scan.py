"""The MinIO scan: a bucket's own key is part of its bucket."""

from __future__ import annotations

from providers.minio.bucket import MinioBucket


def test_a_scan_counts_a_buckets_key_as_part_of_its_bucket(configure, owner, buckets, oob):
    """gc must not list it as an orphan access key, nor as a foreign user; one left behind by its bucket
    is listed as that bucket, which gc --prune then drops (the purge test above drops such a key)."""
    from devstack.scan import scan

    outs = buckets("data")
    instance = configure(MinioBucket())._instances["objects"]
    ours = [(f.kind, f.engine_name, f.owner) for f in scan(instance) if f.owner == owner or owner in f.engine_name]
    assert ours == [("bucket", outs["bucket"], owner)]
    oob.destroy(outs["bucket"])
    left = [(f.kind, f.engine_name, f.owner, f.name) for f in scan(instance, ["bucket", "access_key"])
            if owner in f.engine_name]
    assert left == [("bucket", outs["bucket"], owner, "data")]
